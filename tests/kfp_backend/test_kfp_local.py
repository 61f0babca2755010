"""Backend kfp-local end to end: kfp.local's SubprocessRunner runs the generated components,
kfp's cache and set_retry do their part, the shim does its part, lineage lands in MLMD."""

from __future__ import annotations

import importlib
import json
import logging
import os
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from kfp_test_pipelines import failing, typed

import interlock as il
from interlock.adapters.kfp.backend import KfpLocalBackend
from interlock.adapters.kfp.policies import KfpLocalOptions
from interlock.core.backend.protocol import RunOptions, resolve_params
from interlock.core.base.errors import StepStopped
from interlock.core.record.outcomes import RunResult

MLMD_PYTHON = os.environ.get("INTERLOCK_MLMD_PYTHON")
needs_mlmd = pytest.mark.skipif(
    not (MLMD_PYTHON and os.access(MLMD_PYTHON, os.X_OK)),
    reason="no ml-metadata interpreter: set INTERLOCK_MLMD_PYTHON (see interlock.plugins.mlmd.setup_env)",
)


class Sleeper:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def run(
    pipeline: Any, workdir: Path, *, run_id: str | None = None, sleeper: Any = None, progress: Any = None,
    cache: bool = True, **params: Any,
) -> RunResult:
    spec = il.spec(pipeline)
    options = RunOptions(
        run_id=run_id or f"r-{uuid.uuid4().hex[:8]}", workdir=workdir, sleeper=sleeper or Sleeper(), progress=progress,
        cache=cache,
    )
    return KfpLocalBackend().run(spec, resolve_params(spec, params), options)


def receipt(result: RunResult) -> dict[str, Any]:
    assert result.receipt_path is not None
    return json.loads(Path(result.receipt_path).read_text())


@needs_mlmd
def test_typed_pipeline_runs_caches_and_records_lineage(tmp_path: Path) -> None:
    from interlock.plugins.mlmd import LineageStore

    work = tmp_path / "work"
    first = run(typed.typed, work, run_id="r-typed-1")
    assert first.status == "succeeded", first.error
    report, total, promote, model = (first.outputs[k] for k in ("o0", "o1", "o2", "o3"))
    assert report == typed.Report(auc=pytest.approx(0.8), rows=4, approved=True)
    assert (total, promote) == (4 + 3, True)
    assert isinstance(model, il.Model) and model.metadata == {"framework": "none", "epochs": 3}
    assert json.loads((model.path / "weights.json").read_text()) == {"w": (0 + 1.5 + 3 + 4.5) * 0.5}
    assert model.path.is_relative_to(work / "kfp" / "root")  # pipeline root under interlock's workdir
    assert {n: o.status for n, o in first.steps.items()} == dict.fromkeys(
        ["make_frame", "train", "evaluate", "champion_gate", "total", "register"], "succeeded"
    )
    rec = receipt(first)
    assert rec["backend"] == "kfp-local" and rec["snapshots"] == [{"id": "frame-v1", "source": "make_frame", "node": "train"}]

    second = run(typed.typed, work, run_id="r-typed-2")
    assert second.status == "succeeded", second.error
    statuses = {n: o.status for n, o in second.steps.items()}
    assert statuses["make_frame"] == statuses["train"] == "cached"  # il.Cache() -> KFP caching
    assert statuses["evaluate"] == "succeeded"  # no il.Cache: KFP caching is off for it
    assert second.outputs["o3"].path == model.path  # a cache hit reuses the artifact
    assert receipt(second)["cache_hits"] == ["make_frame", "train"]

    with LineageStore(sqlite_path=work / "lineage" / "mlmd.sqlite") as store:
        chain = store.upstream(str(model.path))
        [root] = chain.roots
        assert root.type == "system.Model"
        producer = root.produced_by
        assert producer is not None and producer.step == "train" and producer.run_id == "r-typed-1"
        assert producer.snapshots == ["frame-v1"]
        [frame] = producer.inputs
        assert frame.type == "system.Dataset" and frame.produced_by is not None
        assert frame.produced_by.step == "make_frame"
        assert set(root.runs) == {"r-typed-1", "r-typed-2"}
        runs = {r.run_id: r for r in store.runs("kfp-typed")}
        assert runs["r-typed-2"].cached_steps == 2 and runs["r-typed-1"].cached_steps == 0
        assert runs["r-typed-1"].parameters["params"] == {"lr": 0.5, "epochs": 3, "tags": ["base"]}


def test_fatal_failure_stops_kfp_retries(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    sleeper = Sleeper()
    result = run(failing.fatal, tmp_path / "work", run_id="r-fatal", sleeper=sleeper, marker_dir=str(calls))
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, il.StepFailed) and (err.step, err.kind) == ("doomed", "FATAL")
    assert "illegal memory access" in err.reason and err.hint
    assert err.receipt_path == str(result.receipt_path)
    assert result.steps["doomed"].status == "failed" and result.steps["doomed"].attempts == 1
    assert result.steps["doomed"].failure["kind"] == "FATAL"
    assert result.steps["after_doomed"].status == "not-run"
    # set_retry allows 3 contention + 1 preempted retries; after a FATAL failure none runs or waits.
    assert receipt(result)["kfp"]["tasks"]["doomed"] == {"kfp_attempts": 1, "retries_stopped_by_fatal_marker": 4}
    assert sleeper.calls == []
    assert (calls / "doomed").read_text() == "1"

    # A retry of the same run that reaches the component: the shim refuses before user code.
    again = run(failing.fatal, tmp_path / "work", run_id="r-fatal", marker_dir=str(calls))
    assert again.status == "failed" and "already failed FATAL" in again.error.reason
    assert (calls / "doomed").read_text() == "1"


def test_contention_waits_kfp_backoff(tmp_path: Path) -> None:
    sleeper = Sleeper()
    result = run(failing.contention, tmp_path / "work", sleeper=sleeper, marker_dir=str(tmp_path / "calls"))
    assert result.status == "succeeded", result.error
    assert result.outputs == {"o0": "scheduled after 3 tries"}
    assert sleeper.calls == [2.0, 6.0]  # Backoff(first=2s, factor=3) through KFP's retry loop
    assert result.steps["squeezed"].attempts == 3
    kinds = [s["failure_kinds"] for s in receipt(result)["steps"]][0]
    assert kinds == ["CONTENTION", "CONTENTION"]


def test_transient_is_retried_inside_one_task_and_lineage_skips_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("INTERLOCK_MLMD_PYTHON", str(tmp_path / "no-such-python"))
    caplog.set_level(logging.INFO, logger="interlock.kfp.lineage")
    events: list[tuple[str, str]] = []
    result = run(failing.transient, tmp_path / "work", marker_dir=str(tmp_path / "calls"),
                 progress=lambda node, event, detail: events.append((node, event)))
    assert result.status == "succeeded", result.error
    assert events == [("flaky", "started"), ("flaky", "succeeded")]  # live, per task
    assert result.outputs == {"o0": "ok after 2"}
    assert result.steps["flaky"].attempts == 2
    assert receipt(result)["kfp"]["tasks"]["flaky"]["kfp_attempts"] == 1  # no new pod for a flake
    assert any("lineage not recorded (ML Metadata not configured)" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "work" / "lineage" / "mlmd.sqlite").exists()


@needs_mlmd
def test_the_lineage_run_option_turns_recording_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # ML Metadata is set up here, so only the option keeps the run out of the store.
    caplog.set_level(logging.INFO, logger="interlock.kfp.lineage")
    work = tmp_path / "work"
    result = il.run(failing.transient, backend="kfp-local", workdir=work, options=KfpLocalOptions(lineage=False),
                    marker_dir=str(tmp_path / "calls"))
    assert result.status == "succeeded", result.error
    assert not (work / "lineage").exists()
    assert not [r for r in caplog.records if "lineage" in r.getMessage()]
    again = il.run(failing.transient, backend="kfp-local", workdir=work, options={"lineage": "true"},
                   marker_dir=str(tmp_path / "calls-2"))
    assert again.status == "succeeded", again.error
    assert (work / "lineage" / "mlmd.sqlite").is_file()


def test_checkpoint_survives_a_kfp_retry(tmp_path: Path) -> None:
    sleeper = Sleeper()
    result = run(failing.resume, tmp_path / "work", sleeper=sleeper, marker_dir=str(tmp_path / "calls"))
    assert result.status == "succeeded", result.error
    assert result.outputs == {"o0": 2}  # resumed from the epoch-1 checkpoint in a new process
    assert (tmp_path / "calls" / "resumable-first").read_text() == "1"
    assert sleeper.calls == [1.0]
    assert result.steps["resumable"].attempts == 2


MODULE = '''
import interlock as il

@il.step(cache=il.Cache())
def bump(x: int) -> int:
    return x + {inc}

@il.step
def show(x: int) -> str:
    return f"x={{x}}"

@il.pipeline(name="kfp-code-change")
def pipe(x: int = 1):
    return show(x=bump(x=x))
'''


def test_a_code_change_invalidates_the_kfp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"kfp_code_change_{uuid.uuid4().hex[:8]}"
    src = tmp_path / "code" / f"{name}.py"
    src.parent.mkdir()
    src.write_text(textwrap.dedent(MODULE.format(inc=1)))
    monkeypatch.syspath_prepend(str(src.parent))
    module = importlib.import_module(name)
    work = tmp_path / "work"
    assert run(module.pipe, work).outputs == {"o0": "x=2"}
    hit = run(module.pipe, work)
    assert hit.steps["bump"].status == "cached" and hit.outputs == {"o0": "x=2"}
    assert run(module.pipe, work, cache=False).steps["bump"].status == "succeeded"  # il.run(cache=False)

    src.write_text(textwrap.dedent(MODULE.format(inc=100)))
    module = importlib.reload(module)
    changed = run(module.pipe, work)
    assert changed.steps["bump"].status == "succeeded"
    assert changed.outputs == {"o0": "x=101"}


def test_preemption_checkpoints_and_kfp_retry_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a cluster task template sets: only there is SIGTERM to an interruptible step a spot
    # reclaim (elsewhere it stops the run: test_a_sigterm_stops_a_kfp_local_task).
    monkeypatch.setenv("INTERLOCK_ON_CLUSTER", "1")
    sleeper = Sleeper()
    result = run(failing.spot, tmp_path / "work", sleeper=sleeper, marker_dir=str(tmp_path / "calls"))
    assert result.status == "succeeded", result.error
    assert result.outputs == {"o0": 3}  # the retry started from the checkpoint taken on SIGTERM
    step = [s for s in receipt(result)["steps"] if s["node"] == "spot_train"][0]
    assert step["failure_kinds"] == ["PREEMPTED"] and len(step["attempts"]) == 2
    assert receipt(result)["kfp"]["tasks"]["spot_train"]["kfp_attempts"] == 2  # a new process, like a new pod
    assert sleeper.calls == [0.0]


def test_a_sigterm_stops_a_kfp_local_task(tmp_path: Path) -> None:
    sleeper = Sleeper()
    result = run(failing.spot, tmp_path / "work", sleeper=sleeper, marker_dir=str(tmp_path / "calls"))
    assert result.status == "stopped"
    assert result.steps["spot_train"].status == "stopped"
    assert isinstance(result.error, StepStopped) and result.error.signal == "SIGTERM"
    step = [s for s in receipt(result)["steps"] if s["node"] == "spot_train"][0]
    assert [a["status"] for a in step["attempts"]] == ["stopped"]  # not retried, by the shim or by kfp
    assert step["facts"]["checkpoint_at_stop"]  # it checkpointed before stopping
    assert receipt(result)["kfp"]["tasks"]["spot_train"]["kfp_attempts"] == 1


def test_int_into_float_arrives_as_float(tmp_path: Path) -> None:
    result = run(typed.widen, tmp_path / "work", n=3)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"o0": 1.5, "o1": 1.5, "o2": 2.5}


def test_optional_values_cross_as_json_text(tmp_path: Path) -> None:
    # x left at None: kfp.local cannot pass a missing optional parameter; "null" text it can.
    result = run(typed.optional, tmp_path / "work")
    assert result.status == "succeeded", result.error
    assert result.outputs == {"o0": "None-a", "o1": None, "o2": 3}


def test_nested_gates_skip_the_inner_block(tmp_path: Path) -> None:
    result = run(typed.nested, tmp_path / "work", x=5)
    assert result.status == "succeeded", result.error
    assert {n: o.status for n, o in result.steps.items()} == {
        "positive": "succeeded", "ship_positive": "succeeded", "big": "succeeded",
        "ship_big": "skipped", "ship_always": "succeeded",
    }


def test_a_spent_transient_budget_stops_kfp_retries(tmp_path: Path) -> None:
    """kfp would retry 3 times with 2s/6s/18s waits, each retry spending the budget again."""
    calls = tmp_path / "calls"
    sleeper = Sleeper()
    result = run(failing.transient_spent, tmp_path / "work", run_id="r-spent", sleeper=sleeper, marker_dir=str(calls))
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, il.StepFailed) and (err.step, err.kind) == ("resets_forever", "TRANSIENT")
    assert receipt(result)["kfp"]["tasks"]["resets_forever"] == {"kfp_attempts": 1, "retries_stopped_by_fatal_marker": 3}
    assert sleeper.calls == []  # no backoff waits for retries that would be refused
    assert (calls / "resets_forever").read_text() == "2"  # the first try and its one in-pod retry


def test_the_executor_input_log_is_redacted(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # kfp's executor logs "Got executor_input:" with every parameter value; kfp.local echoes it.
    from kfp_test_pipelines import secrets

    from interlock.core.run import live

    with live.verbosity(True):  # kfp's own log is shown only to a verbose run (--verbose)
        result = run(secrets.kfp_secrets, tmp_path / "work")
    assert result.status == "succeeded", result.error
    out, err = capfd.readouterr()
    assert "executor_input" in out + err  # the log is there...
    for secret in ("tok-live-8f3a9c1d", "pg-pw-77x"):  # ... without the credentials
        assert secret not in out + err
    assert "postgresql://***@db/f" in out + err


def test_kfps_executor_log_is_kept_out_and_relayed_step_lines_are_redacted(
    tmp_path: Path, capfd: pytest.CaptureFixture[str],
) -> None:
    from kfp_test_pipelines import secrets

    result = run(secrets.kfp_secrets_printed, tmp_path / "work")
    assert result.status == "succeeded", result.error
    out, err = capfd.readouterr()
    assert "executor_input" not in out + err and "KFP Executor" not in out + err  # not verbose: kfp's log is out
    assert "connecting to postgresql://***@db/f with ***\n" in out  # the step's own line, relayed and decoded
    assert "interlock-line" not in out + err
    for secret in ("tok-live-8f3a9c1d", "pg-pw-77x"):
        assert secret not in out + err
