"""Each compile backend says, per trigger kind, native or unsupported (with what to do instead)
in `interlock backends`, and core's capability check refuses an unsupported one at compile the
same way on every backend: naming the feature and the trigger, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import interlock as il
from interlock.core.cli.main import main
from interlock.core.model.triggers import FEATURE

COMPILE = ("flyte", "flyte2", "kfp", "airflow", "argo")
NATIVE = {  # the kinds each platform schedules itself
    "flyte": {"cron", "every"}, "flyte2": {"cron", "every"}, "kfp": {"cron", "every"},
    "airflow": {"cron", "every", "data"}, "argo": {"cron", "every"},
}


@il.step
def echo(snapshot: str) -> str:
    return snapshot


@il.pipeline(name="cap-drift", triggers=[il.OnDrift("s3://b/snap/", model="fraud", uri_input="snapshot")])
def drifting(snapshot: str = "s0") -> str:
    return echo(snapshot=snapshot)


def test_interlock_backends_lists_each_trigger_kind_per_compile_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--json"]) == 0
    listed = {b["backend"]: b["features"] for b in json.loads(capsys.readouterr().out)}
    for backend in COMPILE:
        for kind, feature in FEATURE.items():
            how = listed[backend][feature]
            if kind in NATIVE[backend]:
                assert how.startswith("native ("), (backend, feature, how)
            else:
                assert how.startswith("unsupported (") and "interlock watch FILE --backend" in how, (backend, how)


@pytest.mark.parametrize("backend", COMPILE)
def test_an_unsupported_trigger_is_refused_at_compile_the_same_way_everywhere(tmp_path: Path, backend: str) -> None:
    with pytest.raises(il.CapabilityError) as err:
        il.compile(drifting, backend=backend, out=tmp_path, image="registry.example/team:1")
    assert str(err.value).startswith(f"pipeline 'cap-drift', step 'drift-0': backend {backend!r} cannot express "
                                     "'trigger.drift' (used by drift-0): no orchestrator measures drift: run "
                                     "`interlock watch FILE --backend ")
    assert not list(tmp_path.iterdir())
