"""``flyte2-local``: the compiled module, imported, its driver run in the `flyte` SDK's local mode.

What runs is what ``interlock compile --backend flyte2`` writes (``render.py``), with the
run's work directory as its value store. The SDK keeps its local cache and run records in a
SQLite file under ``~/.flyte/`` by default: here it is the work directory's
(``<workdir>/cache/flyte2/local-cache``), so runs never touch the user's home.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from interlock.core.backend.protocol import RunOptions
from interlock.core.base.errors import CapabilityError, RunFailed
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, settle, with_finally
from interlock.core.record.receipt import assemble_receipt, prefetch_git_info
from interlock.core.run import live
from interlock.core.run.bindings import gate_decisions, resolve
from interlock.core.run.env import exported, state_dir_of
from interlock.core.run.records import ALL_KINDS
from interlock.core.run.state import RunContext

from .render import PRIMITIVES, render
from .task import LocalRun, local_run

BACKEND = "flyte2-local"

# The modules of the last few specs run in this process, as a Flyte 2 user's module is
# imported once: a rerun skips rendering and importing it. Keyed by the spec object (held
# here, so its id is not reused) and the value store.
_MODULES: OrderedDict[tuple[int, str], tuple[PipelineSpec, ModuleType]] = OrderedDict()
_MODULES_MAX = 8
_LOCK = threading.Lock()


def module_for(spec: PipelineSpec, store: Path) -> ModuleType:
    key = (id(spec), str(store))
    with _LOCK:
        held = _MODULES.get(key)
        if held is not None and held[0] is spec:
            return held[1]
    source = render(spec, store=str(store), in_process=ALL_KINDS, backend=BACKEND)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = store / "modules" / f"{spec.name.replace('-', '_')}_{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(source)
    name = f"interlock_flyte2_{digest}"
    module = sys.modules.get(name)
    if module is None:
        loader = importlib.util.spec_from_file_location(name, path)
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        loader.loader.exec_module(module)
    with _LOCK:
        _MODULES[key] = (spec, module)
        while len(_MODULES) > _MODULES_MAX:
            _MODULES.popitem(last=False)
    return module


_INIT = threading.Lock()
_state: dict[str, Any] = {"init": False, "db": None}


@contextmanager
def isolated_flyte(cache_dir: Path) -> Iterator[None]:
    """The SDK initialised once for local runs, its SQLite cache in ``cache_dir``."""
    import flyte
    from flyte._persistence import _db  # no public setting: the path is a module constant

    with _INIT:
        if not _state["init"]:
            flyte.init(log_level=logging.CRITICAL)
            _state["init"] = True
        cache_dir.mkdir(parents=True, exist_ok=True)
        if _state["db"] != str(cache_dir):  # another work directory: reopen the database there
            if _db.LocalDB._conn is not None:
                asyncio.run(_db.LocalDB.close())
            _db.LocalDB.close_sync()
            _db.LocalDB._initialized = False
            _db.DEFAULT_CACHE_DIR = str(cache_dir)
            _state["db"] = str(cache_dir)
        found = _db.LocalDB._get_cache_dir()
        if not str(found).startswith(str(cache_dir)):  # a .flyte/config.yaml moves it: refuse to write there
            raise CapabilityError(f"flyte2-local: the SDK's config file puts its local cache in {found}",
                                  hint="run without a .flyte/config.yaml in this directory or your home")
    yield


def driver_inputs(spec: PipelineSpec, params: dict[str, Any]) -> dict[str, Any]:
    """The driver task's arguments: primitives as they are, other values as JSON text."""
    return {p.name: params[p.name] if p.type.kind in PRIMITIVES else json.dumps(params[p.name])
            for p in spec.params if p.name in params}


class Flyte2LocalRunner:
    def __init__(self, spec: PipelineSpec, options: RunOptions):
        self.spec, self.options = spec, options

    def run(self, params: dict[str, Any]) -> RunResult:
        import flyte

        spec, options = self.spec, self.options
        started = time.time()
        prefetch_git_info(spec)
        state_dir = state_dir_of(options.run_dir)
        run = RunContext(spec.name, options.run_id, BACKEND, state_dir, retry_in_process=ALL_KINDS,
                         sleeper=options.sleeper, checkpoint_root=options.checkpoint_store)
        store = options.cache_dir / "flyte2"
        module = module_for(spec, store)
        emitted: set[str] = set()

        def emit(node: str, event: str, detail: str) -> None:
            if event != "started":
                emitted.add(node)
            options.emit(node, event, detail)

        local = LocalRun(run, functions=dict(options.functions), emit=emit)
        error: BaseException | None = None
        work = options.run_dir / "flyte2"
        with isolated_flyte(store), exported(run.to_env()), local_run(local), live.held():
            try:
                flyte.with_runcontext(
                    mode="local", raw_data_path=str(work / "raw"), run_base_dir=str(work / "base"),
                    disable_run_cache=not options.cache, log_level=logging.CRITICAL,
                ).run(module.DRIVER, **driver_inputs(spec, params))
            except Exception as exc:  # noqa: BLE001 - a failed step fails the driver; its books say which
                error = exc
        d = local.driver
        if d is None:
            raise RunFailed(f"flyte2-local: the driver task of {spec.name!r} did not start: {error}",
                            pipeline=spec.name) from error
        seen = d.seen
        gates = gate_decisions(spec, d.params, d.outputs)
        outcome = settle(spec, run.state, seen, gates=gates)
        outcome = with_finally(spec, run.state, outcome, seen, gates)
        for name, o in outcome.steps.items():  # what was not told live (skipped, not run)
            if name not in emitted:
                options.emit(name, o.status, f"{o.attempts} attempt(s)" if o.attempts else "")
        outputs = {} if outcome.error else {k: resolve(b, d.params, d.outputs) for k, b in spec.outputs}
        receipt = assemble_receipt(
            spec, run_id=options.run_id, backend=BACKEND, state_dir=state_dir, params=params, status=outcome.status,
            statuses=outcome.statuses, started=started, fragments=outcome.fragments, outputs=outputs, gates=gates,
        )
        if outcome.error is not None:
            outcome.error.receipt_path = str(receipt)
        return RunResult(spec.name, options.run_id, BACKEND, outcome.status, outputs, outcome.steps, receipt,
                         outcome.error, maps=d.maps)
