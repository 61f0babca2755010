"""One process of a race on one MLflow store (driven by test_mlflow_promotion.py).

    python mlflow_race_worker.py SPEC_JSON

SPEC: {"uri", "ready", "go", "action": "open" | "promote", "model", "version",
"expected", "slow_s"}. The worker imports MLflow, writes ``ready``, waits for
``go`` to exist, then acts and prints one JSON line: {"ok": true, ...} or {"ok": false,
"error": type name, "message": ...}.

``slow_s`` stretches the check-then-set window the way a slow store or network would: the
champion read sleeps after reading, and a champion move sleeps after writing. Only test
code is patched, never the registry's own logic.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> int:
    spec = json.loads(sys.argv[1])
    import mlflow  # noqa: F401 - import before the barrier: the race is about the store, not imports

    from interlock.plugins.mlflow import MlflowRegistry

    slow = float(spec.get("slow_s") or 0)
    if slow:
        from mlflow import MlflowClient

        read, move = MlflowClient.get_registered_model, MlflowClient.set_registered_model_alias

        def slow_read(self, *a, **k):
            out = read(self, *a, **k)
            time.sleep(slow)
            return out

        def slow_move(self, name, alias, version):
            move(self, name, alias, version)
            if alias == "champion":
                time.sleep(slow)

        MlflowClient.get_registered_model = slow_read
        MlflowClient.set_registered_model_alias = slow_move

    reg = MlflowRegistry(tracking_uri=spec["uri"])
    if spec["action"] == "promote":
        reg.client  # noqa: B018 - open the store before the barrier
    Path(spec["ready"]).touch()
    deadline = time.monotonic() + 120
    while not Path(spec["go"]).exists():
        if time.monotonic() > deadline:
            print(json.dumps({"ok": False, "error": "Timeout", "message": "no go signal"}))
            return 3
        time.sleep(0.001)
    try:
        if spec["action"] == "open":
            out = {"champion": reg.champion(spec["model"]), "run": reg.log_run("race-open")}
        else:
            out = {"previous": reg.promote(spec["model"], spec["version"], expected_champion=spec["expected"])}
    except Exception as exc:  # reported to the test, which asserts on it
        print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc)}))
        return 1
    print(json.dumps({"ok": True, **out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
