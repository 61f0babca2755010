"""A run-level checkpoint store: il.run(checkpoint_store=...) / --checkpoint-store / the env.

Steps without their own CheckpointPolicy(store=) keep checkpoints there, and a resume of the
run finds the same store without being told again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import interlock as il
from interlock.core.backend.api import checkpoint_store_for, record_checkpoint_store
from interlock.core.run.env import EnvName
from interlock.core.run.state import RunState

ATTEMPTS: list[int] = []


@il.step(checkpoint=il.CheckpointPolicy(keep=1), retry=il.Retry(transient=1))
def count(ctx: il.StepContext) -> int:
    saved = ctx.checkpoint.load()
    start = int(saved.decode()) if saved else 0
    ctx.checkpoint.save(str(start + 5).encode(), step=start + 5)
    ATTEMPTS.append(start)
    if start == 0:
        raise ConnectionResetError("flaky network")  # TRANSIENT: retried, resumes from 5
    return start


@il.pipeline(name="ckpt-store")
def ckpt_store():
    return count()


def test_steps_checkpoint_into_the_run_level_store(tmp_path: Path) -> None:
    ATTEMPTS.clear()
    store = tmp_path / "elsewhere"
    result = il.run(ckpt_store, workdir=tmp_path / "work", checkpoint_store=str(store), run_id="cs-1")
    assert result.outputs["o0"] == 5 and ATTEMPTS == [0, 5]  # the retry resumed from the store
    assert list(store.rglob("*")), "nothing was written to the run-level store"
    assert not list((tmp_path / "work" / "runs" / "cs-1" / "state" / "checkpoints").rglob("*.json"))


def test_a_resume_reuses_the_recorded_store_and_the_env_is_the_default(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    state = RunState(tmp_path / "state", "r1")
    monkeypatch.delenv(EnvName.CHECKPOINT_ROOT, raising=False)
    assert checkpoint_store_for(state, None) is None
    monkeypatch.setenv(EnvName.CHECKPOINT_ROOT, "s3://team/ckpt")
    assert checkpoint_store_for(state, None) == "s3://team/ckpt"
    record_checkpoint_store(state, "s3://run/own")
    assert checkpoint_store_for(state, None) == "s3://run/own"  # what the run used wins over the env
    assert checkpoint_store_for(state, "rel/dir") == str(Path("rel/dir").resolve())


def test_the_cli_passes_checkpoint_store(tmp_path: Path) -> None:
    from interlock.core.cli.main import main

    store = tmp_path / "cli-store"
    code = main(["run", f"{__file__}:ckpt_store", "--workdir", str(tmp_path / "w"), "--run-id", "cs-cli",
                 "--checkpoint-store", str(store)])
    assert code == 0  # the CLI imports the file as its own module: look at the store instead
    assert list(store.rglob("*.json"))
    assert (tmp_path / "w" / "runs" / "cs-cli" / "state" / "checkpoint_store").read_text() == str(store.resolve())
