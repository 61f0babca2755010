"""Run ids: validated up front, locked while a run runs, and a reused id means resume with
no stale value ever read (issue 11, item 7 and the resume part of item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from backends import other_backends, runnable_backends
from core_pipelines import rerun
from core_pipelines.rerun import calls_of

import interlock as il
from interlock.core.backend.protocol import RunOptions, check_run_id
from interlock.core.base.errors import RunIdError, RunInProgress, StepFailed
from interlock.core.base.status import FailureKind, Status
from interlock.core.cli import main as cli
from interlock.core.run.env import state_dir_under
from interlock.core.run.records import StopMarker
from interlock.core.run.state import RunState, lock_run

FILE = str(Path(rerun.__file__))


def run_cli(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize("run_id", ["r1", "r-typed-1", "dist1", "a", "r261130150405-abc123"])
def test_valid_run_ids(run_id):
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize(
    "run_id",
    ["../../x", "a/b", "", "R1", "1run", "-r", "r-", "r_1", "r.1", "r 1", "r" * 21, "rün", ".."],
)
def test_invalid_run_ids_name_the_rule(run_id):
    with pytest.raises(RunIdError, match="lowercase letters, digits and '-'"):
        check_run_id(run_id)


def test_every_backend_gets_the_same_rule_through_run_options(tmp_path):
    with pytest.raises(RunIdError):
        RunOptions(run_id="../escape", workdir=tmp_path)


def test_traversing_run_id_writes_nothing_outside_the_workdir(tmp_path, capsys):
    work = tmp_path / "a" / "b" / "work"
    rc, _, err = run_cli(
        capsys, "run", f"{FILE}:dataset_files", "--workdir", str(work), "--run-id", "../../x",
        "-p", 'names=["a"]', "-p", f"calls={tmp_path / 'calls'}",
    )
    assert rc == 2, err
    assert "run id '../../x'" in err and "lowercase letters" in err
    assert not (tmp_path / "a" / "x").exists() and not (tmp_path / "a" / "b" / "x").exists()
    assert calls_of(tmp_path / "calls", "files") == 0


@pytest.mark.parametrize("backend", runnable_backends())
def test_il_run_refuses_a_bad_id_on_every_backend(tmp_path, backend):
    with pytest.raises(RunIdError):
        il.run(rerun.dataset_files, backend, workdir=tmp_path, run_id="Bad/Id", names=["a"], calls=str(tmp_path))
    assert not (tmp_path / "runs").exists()


# -- stale values on a reused id ------------------------------------------------------------
def test_reused_id_does_not_merge_old_dataset_files(tmp_path):
    calls = str(tmp_path / "calls")
    first = il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["a", "b"], calls=calls)
    assert first.outputs["o0"] == ["a", "b"]
    second = il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["c"], calls=calls)
    assert second.outputs["o0"] == ["c"]


def test_reused_id_does_not_read_an_old_null_value(tmp_path):
    assert il.run(rerun.maybe_dataset, "local", workdir=tmp_path, run_id="r1", present=False).outputs["o0"] == "none"
    again = il.run(rerun.maybe_dataset, "local", workdir=tmp_path, run_id="r1", present=True)
    assert again.outputs["o0"] == "new data"


def test_reused_id_does_not_poison_the_cache(tmp_path):
    il.run(rerun.cached_dataset_files, "local", workdir=tmp_path, run_id="r1", names=["a", "b"])
    il.run(rerun.cached_dataset_files, "local", workdir=tmp_path, run_id="r1", names=["c"])
    # A fresh run with the same inputs hits the cache entry the reused run wrote.
    fresh = il.run(rerun.cached_dataset_files, "local", workdir=tmp_path, run_id="r2", names=["c"])
    assert fresh.steps["cached_files"].status is Status.CACHED
    assert fresh.outputs["o0"] == ["c"]


def test_a_succeeded_step_is_not_rerun_on_a_reused_id_with_the_same_inputs(tmp_path):
    calls = str(tmp_path / "calls")
    il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["a"], calls=calls)
    again = il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["a"], calls=calls)
    assert again.outputs["o0"] == ["a"]
    assert calls_of(calls, "files") == 1
    assert again.steps["files"].status is Status.SUCCEEDED
    # Other inputs: the step reruns, and its old files are gone.
    il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["b"], calls=calls)
    assert calls_of(calls, "files") == 2


def test_values_are_written_to_a_temporary_place_and_renamed(tmp_path):
    il.run(rerun.dataset_files, "local", workdir=tmp_path, run_id="r1", names=["a"], calls=str(tmp_path / "c"))
    values = tmp_path / "runs" / "r1" / "values"
    assert sorted(p.name for p in values.iterdir()) == ["files", "listing"]  # no temporary left behind


# -- the lock --------------------------------------------------------------------------------
def test_a_second_run_with_the_same_id_fails_at_once(tmp_path):
    go = tmp_path / "go"
    results: dict[str, object] = {}

    def first():
        results["first"] = il.run(rerun.blocking, "local", workdir=tmp_path, run_id="r1", go=str(go), value=1)

    t = threading.Thread(target=first)
    t.start()
    try:
        lock = tmp_path / "runs" / "r1" / ".lock"
        deadline = time.monotonic() + 20
        while not (lock.exists() and lock.read_text().strip()):
            assert time.monotonic() < deadline, "the first run never started"
            time.sleep(0.02)
        t0 = time.monotonic()
        with pytest.raises(RunInProgress, match=rf"run r1 is in progress \(pid {os.getpid()}\)"):
            il.run(rerun.blocking, "local", workdir=tmp_path, run_id="r1", go=str(go), value=2)
        assert time.monotonic() - t0 < 5
    finally:
        go.write_text("go")
        t.join(30)
    assert results["first"].outputs["o0"] == 1  # type: ignore[attr-defined]


def test_cli_reports_a_run_in_progress(tmp_path, capsys):
    with lock_run(tmp_path / "runs" / "r1", "r1"):
        rc, _, err = run_cli(
            capsys, "run", f"{FILE}:blocking", "--workdir", str(tmp_path), "--run-id", "r1",
            "-p", f"go={tmp_path}", "-p", "value=1",
        )
    assert rc == 1
    assert "run r1 is in progress" in err


def test_a_stale_lock_from_a_dead_process_is_taken_over(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    code = (
        "import os, sys; from pathlib import Path; from interlock.core.run.state import lock_run\n"
        "with lock_run(Path(sys.argv[1]), 'r1'):\n"
        "    os._exit(0)  # dies holding the lock: no cleanup runs\n"
    )
    subprocess.run([sys.executable, "-c", code, str(run_dir)], check=True, timeout=60)
    assert (run_dir / ".lock").read_text().strip()  # the dead process's pid is still written there
    result = il.run(rerun.blocking, "local", workdir=tmp_path, run_id="r1", go=str(tmp_path), value=7)
    assert result.outputs["o0"] == 7


# -- resume ----------------------------------------------------------------------------------
def _resumable(tmp_path, **kw):
    flag = tmp_path / "broken"
    calls = tmp_path / "calls"
    return flag, calls, dict(broken_flag=str(flag), calls=str(calls), **kw)


def test_resume_clears_the_fatal_marker_keeps_the_checkpoint_and_skips_what_succeeded(tmp_path):
    flag, calls, params = _resumable(tmp_path)
    flag.write_text("bug")
    with pytest.raises(StepFailed) as failed:
        il.run(rerun.resumable, "local", workdir=tmp_path, run_id="r1", **params)
    assert failed.value.kind is FailureKind.FATAL
    state = RunState(state_dir_under(tmp_path, "r1"), "r1")
    assert state.read_marker("train", StopMarker.FATAL) is not None
    flag.unlink()  # the fix

    result = il.run(rerun.resumable, "local", workdir=tmp_path, resume="r1", **params)
    assert result.run_id == "r1"
    # train resumed from the checkpoint its failed attempt committed at epoch 2
    assert result.outputs["o0"] == "score=12"
    assert (calls_of(calls, "prepare"), calls_of(calls, "train"), calls_of(calls, "report")) == (1, 2, 1)
    assert state.read_marker("train", StopMarker.FATAL) is None
    assert result.steps["prepare"].status is Status.SUCCEEDED
    (resumed,) = state.resumes()
    assert [(c["node"], c["kind"], c["failure"]["kind"]) for c in resumed["cleared"]] == [("train", "fatal", "FATAL")]
    # The receipt fragment keeps the failed attempt and the resumed one.
    assert [a.status for a in state.read_fragment("train").attempts] == [Status.FAILED, Status.SUCCEEDED]


def test_without_resume_the_marker_blocks_and_says_how_to_resume(tmp_path):
    from interlock.core.run.runtime import execute_step
    from interlock.core.run.state import RunContext

    flag, calls, params = _resumable(tmp_path)
    flag.write_text("bug")
    with pytest.raises(StepFailed):
        il.run(rerun.resumable, "local", workdir=tmp_path, run_id="r1", **params)
    run = RunContext("resumable", "r1", "local", state_dir_under(tmp_path, "r1"))
    step = rerun.resumable.spec.step_of(rerun.resumable.spec.node("train"))
    with pytest.raises(StepFailed, match="already failed FATAL") as refused:
        execute_step(run, step, "train", {"x": 10, "broken_flag": str(flag), "calls": str(calls)})
    assert "--resume r1" in str(refused.value)


def test_resume_of_an_unknown_run_is_a_usage_error(tmp_path, capsys):
    rc, _, err = run_cli(
        capsys, "run", f"{FILE}:blocking", "--workdir", str(tmp_path), "--resume", "r9",
        "-p", f"go={tmp_path}", "-p", "value=1",
    )
    assert rc == 2
    assert "no run r9" in err


def test_cli_resume(tmp_path, capsys):
    flag, calls, params = _resumable(tmp_path)
    flag.write_text("bug")
    args = ["-p", f"broken_flag={flag}", "-p", f"calls={calls}"]
    rc, _, _ = run_cli(capsys, "run", f"{FILE}:resumable", "--workdir", str(tmp_path), "--run-id", "r1", *args)
    assert rc == 1
    flag.unlink()
    rc, out, err = run_cli(capsys, "run", f"{FILE}:resumable", "--workdir", str(tmp_path), "--resume", "r1", *args)
    assert rc == 0, err
    assert "score=12" in out and "run r1" in out
    assert "cleared stop markers: train (fatal)" in err
    assert "done in an earlier attempt of this run" in err
    assert calls_of(calls, "prepare") == 1


def test_resume_restarts_the_retry_budget(tmp_path):
    calls = tmp_path / "calls"
    for _ in range(2):
        with pytest.raises(StepFailed):
            il.run(rerun.always_flaky, "local", workdir=tmp_path, run_id="r1", calls=str(calls))
    # Two attempts each time (transient=1): the earlier attempts do not spend the resumed budget.
    assert calls_of(calls, "flaky") == 4


def test_conflicting_run_id_and_resume(tmp_path):
    with pytest.raises(RunIdError, match="resume"):
        il.run(rerun.blocking, "local", workdir=tmp_path, run_id="r1", resume="r2", go=str(tmp_path), value=1)


# -- resume on the other local backends (what their capability line says) -----------------
@pytest.mark.parametrize("backend", runnable_backends("resume=emulated"))
def test_resume_on_flyte_local_and_kfp_local(tmp_path, backend):
    flag, calls, params = _resumable(tmp_path)
    flag.write_text("bug")
    with pytest.raises(StepFailed) as failed:
        il.run(rerun.resumable, backend, workdir=tmp_path, run_id="r1", **params)
    assert failed.value.kind is FailureKind.FATAL
    flag.unlink()
    result = il.run(rerun.resumable, backend, workdir=tmp_path, resume="r1", **params)
    assert result.outputs["o0"] == "score=12"  # train restored the checkpoint of its failed attempt
    assert RunState(state_dir_under(tmp_path, "r1"), "r1").markers() == []
    # No step of this pipeline is cached: what succeeded before runs again on these backends.
    assert (calls_of(calls, "prepare"), calls_of(calls, "report")) == (2, 1)


@pytest.mark.parametrize("backend", other_backends())
def test_reused_id_reads_no_stale_dataset_files_on_flyte_local_and_kfp_local(tmp_path, backend):
    calls = str(tmp_path / "calls")
    il.run(rerun.dataset_files, backend, workdir=tmp_path, run_id="r1", names=["a", "b"], calls=calls)
    again = il.run(rerun.dataset_files, backend, workdir=tmp_path, run_id="r1", names=["c"], calls=calls)
    assert again.outputs["o0"] == ["c"]


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_cache_hit_on_a_reused_id_is_reported_cached(tmp_path, backend):
    il.run(rerun.cached_dataset_files, backend, workdir=tmp_path, run_id="r1", names=["a"])
    again = il.run(rerun.cached_dataset_files, backend, workdir=tmp_path, run_id="r1", names=["b"])
    assert again.outputs["o0"] == ["b"]
    back = il.run(rerun.cached_dataset_files, backend, workdir=tmp_path, run_id="r1", names=["a"])
    assert back.steps["cached_files"].status is Status.CACHED
    assert back.outputs["o0"] == ["a"]


def test_resume_reuses_the_parameters_the_run_ran_with(tmp_path):
    flag, calls, params = _resumable(tmp_path, n=2)
    flag.write_text("bug")
    with pytest.raises(StepFailed):
        il.run(rerun.resumable, "local", workdir=tmp_path, run_id="r1", **params)
    flag.unlink()
    result = il.run(rerun.resumable, "local", workdir=tmp_path, resume="r1")  # nothing given again
    assert result.outputs["o0"] == "score=22"  # n=2, not the default n=1
    assert calls_of(calls, "prepare") == 1
    # A parameter given again wins over the recorded one.
    again = il.run(rerun.resumable, "local", workdir=tmp_path, resume="r1", n=3)
    assert calls_of(calls, "prepare") == 2  # its input changed: it ran again
    # x=30; train restored its latest checkpoint (epoch 3): checkpoints are not keyed by
    # inputs (docs/resuming.md), the step sees it resumed.
    assert again.outputs["o0"] == "score=33"


def test_a_secret_parameter_is_not_recorded_and_must_be_given_again(tmp_path, capsys):
    il.run(rerun.secretive, "local", workdir=tmp_path, run_id="r1", api_token="hunter2-secret", value=5)
    state_dir = state_dir_under(tmp_path, "r1")
    assert "hunter2" not in (state_dir / "params.json").read_text()
    rc, _, err = run_cli(capsys, "run", f"{FILE}:secretive", "--workdir", str(tmp_path), "--resume", "r1")
    assert rc == 2
    assert "port 'api_token'" in err and "pass it again" in err
    rc, out, err = run_cli(capsys, "run", f"{FILE}:secretive", "--workdir", str(tmp_path), "--resume", "r1",
                           "-p", "api_token=hunter2-secret")
    assert rc == 0, err
    assert "o0: 19" in out  # value=5 recorded, not the default 1


def test_a_run_killed_with_sigkill_resumes_from_its_checkpoint(tmp_path):
    """The fault a laptop or CI runner produces: the whole process dies mid-step, holding the
    lock. The resume takes the lock over, skips the step that finished, and the killed step
    continues from its last committed checkpoint."""
    import signal

    calls = tmp_path / "calls"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(rerun.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "interlock.core.cli.main", "run", f"{FILE}:killable", "--workdir", str(tmp_path),
            "-p", f"calls={calls}", "-p", "n=4"]
    proc = subprocess.Popen([*argv, "--run-id", "r1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (calls / "epoch-2").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    done = subprocess.run([*argv[:7], "--resume", "r1"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "x=40 started_at=2" in done.stdout  # n=4 recorded; resumed at the epoch-2 checkpoint
    assert (calls_of(calls, "prepare"), calls_of(calls, "long_train")) == (1, 2)


def test_a_dataclass_parameter_given_as_json_is_recorded(tmp_path, capsys):
    # The CLI passes a dataclass parameter as its JSON object; a resume must get it back.
    il.run(rerun.configured, "local", workdir=tmp_path, run_id="r1", cfg={"lr": 0.5, "layers": 3})
    again = il.run(rerun.configured, "local", workdir=tmp_path, resume="r1")
    assert again.outputs["o0"] == "lr=0.5 layers=3"
    rc, out, err = run_cli(capsys, "run", f"{FILE}:configured", "--workdir", str(tmp_path), "--resume", "r1")
    assert rc == 0, err
