"""The shim's receipt fragments on flyte-local, written with fewer file operations (issue 12,
item 2): a node's first fragment is created in place (no rename over nothing), later ones
replace it atomically. What must hold: a step killed by SIGKILL mid-call still leaves its
"started" record (the attempt shows as killed, and a resume keeps it); a file cut short or
left empty is never taken for a record; nothing but the first write of a node skips the
rename.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlock as il
from interlock.core.failures import Failure, FailureKind
from interlock.core.loader import load_pipeline
from interlock.core.runstate import Fragment, RunState, create_text, write_text_atomic
from interlock.core.status import Status

KILLED_ONCE = """
import os
import signal
from pathlib import Path

import interlock as il


@il.step
def prepare(x: int) -> int:
    return x + 1


@il.step
def train(x: int, marker: str) -> int:
    if not Path(marker).exists():
        Path(marker).write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer, an evicted pod: no handler runs
    return x * 10


@il.pipeline(name="killed-once-flyte")
def killed_once(x: int = 1, marker: str = "m"):
    return train(x=prepare(x=x), marker=marker)
"""


def test_a_step_killed_mid_call_on_flyte_local_leaves_its_started_record(tmp_path: Path) -> None:
    source = tmp_path / f"killed_flyte_{tmp_path.name.replace('-', '_')}.py"
    source.write_text(KILLED_ONCE)
    work, marker = tmp_path / "work", tmp_path / "marker"
    argv = [sys.executable, "-m", "interlock.core.cli", "run", str(source), "--backend", "flyte-local",
            "--workdir", str(work), "--run-id", "r-kill", "-p", f"marker={marker}"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr  # SIGKILL: no receipt, no handler ran
    receipts = work / "runs" / "r-kill" / "state" / "receipts"
    fragment = json.loads((receipts / "train.json").read_text())
    assert [a["status"] for a in fragment["attempts"]] == ["killed"]
    assert json.loads((receipts / "prepare.json").read_text())["status"] == "succeeded"
    assert not [p.name for p in receipts.iterdir() if p.name.endswith(".tmp")]  # no rename was pending

    resumed = il.run(load_pipeline(str(source)), backend="flyte-local", workdir=work, run_id="r-kill",
                     marker=str(marker), progress=False)
    assert resumed.outputs == {"o0": 20}
    train = next(s for s in json.loads(Path(resumed.receipt_path).read_text())["steps"] if s["node"] == "train")
    assert [a["status"] for a in train["attempts"]] == ["killed", "succeeded"]
    assert "no end was recorded" in train["attempts"][0]["decision"]


KILLED_ON_RETRY = """
import os
import signal
from pathlib import Path

import interlock as il


@il.step(retry=il.Retry(transient=2))
def train(x: int, marker: str) -> int:
    if not Path(marker).exists():
        Path(marker).write_text("failed once")
        raise ConnectionResetError("a flake")  # TRANSIENT: retried in-process on flyte-local
    if Path(marker).read_text() == "failed once":
        Path(marker).write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)  # the retry is killed: its fragment existed already
    return x * 10


@il.pipeline(name="killed-on-retry")
def killed_on_retry(x: int = 1, marker: str = "m"):
    return train(x=x, marker=marker)
"""


def test_a_retry_killed_mid_call_is_swapped_into_the_existing_fragment(tmp_path: Path) -> None:
    source = tmp_path / f"killed_retry_{tmp_path.name.replace('-', '_')}.py"
    source.write_text(KILLED_ON_RETRY)
    work, marker = tmp_path / "work", tmp_path / "marker"
    argv = [sys.executable, "-m", "interlock.core.cli", "run", str(source), "--backend", "flyte-local",
            "--workdir", str(work), "--run-id", "r-retry", "-p", f"marker={marker}"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    receipts = work / "runs" / "r-retry" / "state" / "receipts"
    fragment = json.loads((receipts / "train.json").read_text())
    assert [a["status"] for a in fragment["attempts"]] == ["failed", "killed"]
    assert fragment["attempts"][0]["failure"]["kind"] == "TRANSIENT"

    resumed = il.run(load_pipeline(str(source)), backend="flyte-local", workdir=work, run_id="r-retry",
                     marker=str(marker), progress=False)
    assert resumed.outputs == {"o0": 10}
    train = next(s for s in json.loads(Path(resumed.receipt_path).read_text())["steps"] if s["node"] == "train")
    assert [a["status"] for a in train["attempts"]] == ["failed", "killed", "succeeded"]
    assert not [p.name for p in receipts.iterdir() if not p.name.endswith(".json")]  # no old copy left


def test_swap_into_replaces_whole_and_falls_back_to_a_rename(tmp_path: Path) -> None:
    from interlock.core import swap_rename

    path, tmp = tmp_path / "f.json", tmp_path / ".f.json.1.tmp"
    tmp.write_text("new")
    swap_rename.swap_into(str(tmp), str(path))  # nothing there yet: a rename
    assert path.read_text() == "new" and not tmp.exists()
    tmp.write_text("newer")
    swap_rename.swap_into(str(tmp), str(path))  # swapped, and the old copy removed
    assert path.read_text() == "newer" and not tmp.exists()
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: F401 - the swap is looked up once ctypes is loaded (flytekit loads it)

        assert swap_rename._lookup(), "glibc has renameat2: the swap is used here"
    saved = swap_rename._renameat2
    try:
        swap_rename._renameat2 = False  # a platform without it
        tmp.write_text("newest")
        swap_rename.swap_into(str(tmp), str(path))
        assert path.read_text() == "newest" and not tmp.exists()
    finally:
        swap_rename._renameat2 = saved


def _fragment(run_id: str, node: str, attempts: int) -> Fragment:
    from interlock.core.runstate import Attempt

    return Fragment(run_id=run_id, node=node, step=node, status=Status.FAILED, fingerprint="f", image=None,
                    started=1.0, ended=2.0,
                    attempts=[Attempt(i + 1, 1.0, 2.0, Status.FAILED, Failure(FailureKind.TRANSIENT, "x").to_dict())
                              for i in range(attempts)])


def test_create_text_never_replaces_a_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.json"  # the folder is made on the first write
    assert create_text(path, "one")
    assert not create_text(path, "two")
    assert path.read_text() == "one"
    write_text_atomic(path, "three")
    assert path.read_text() == "three"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.json"]  # no temporary file left


@pytest.mark.parametrize("left", ["", '{"run_id": "r", "node": "n", "attem'])
def test_a_fragment_cut_short_is_absent_and_the_next_write_replaces_it(tmp_path: Path, left: str) -> None:
    state = RunState(tmp_path / "state", "r")
    path = state.fragment_path("n")
    path.parent.mkdir(parents=True)
    path.write_text(left)  # a process killed between creating the file and writing it whole
    assert state.read_fragment("n") is None
    assert state.fragments(["n"]) == {}
    state.write_fragment(_fragment("r", "n", 1), new=True)  # "new" but a file is there: replaced whole
    assert len(state.read_fragment("n").attempts) == 1


def test_only_a_new_fragment_skips_the_rename(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state", "r")
    state.write_fragment(_fragment("r", "n", 1), new=True)
    state.write_fragment(_fragment("r", "n", 2), new=True)  # one is there now: not overwritten in place
    assert len(state.read_fragment("n").attempts) == 2
    state.write_fragment(_fragment("r", "n", 3))
    assert len(state.read_fragment("n").attempts) == 3
    # Another run's fragment in a reused state folder is replaced, never appended to.
    other = RunState(tmp_path / "state", "r2")
    assert other.read_fragment("n") is None
    other.write_fragment(_fragment("r2", "n", 1), new=True)
    assert len(other.read_fragment("n").attempts) == 1


def test_a_process_without_ctypes_renames_rather_than_importing_it(tmp_path: Path) -> None:
    # A KFP task process writes a fragment or two: importing ctypes (1.5 ms) would cost more
    # than the swap saves.
    code = (
        "import sys; from interlock.core import swap_rename; "
        f"open({str(tmp_path / 'a')!r}, 'w').write('1'); open({str(tmp_path / 'b')!r}, 'w').write('2'); "
        f"swap_rename.swap_into({str(tmp_path / 'b')!r}, {str(tmp_path / 'a')!r}); "
        "print('ctypes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert (tmp_path / "a").read_text() == "2" and not (tmp_path / "b").exists()
