"""The shim's receipt fragments on flyte-local, written with few file operations (issue 12,
item 2): a node's first fragment creates its file, later ones append a record to it (one JSON
record a line; the last whole line is the fragment). What must hold: a step killed by SIGKILL
mid-call still leaves its "started" record (the attempt shows as killed, and a resume keeps
it); a record cut short, or a file left empty, is never taken for a record, and never hides
the record before it or the one after it; another run's records are never this run's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlock as il
from interlock.core.base.status import FailureKind, Status
from interlock.core.dsl.loader import load_pipeline
from interlock.core.failure.record import Failure
from interlock.core.run.files import append_record, create_text, last_object, write_text_atomic
from interlock.core.run.records import Fragment
from interlock.core.run.state import RunState

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
    argv = [sys.executable, "-m", "interlock.core.cli.main", "run", str(source), "--backend", "flyte-local",
            "--workdir", str(work), "--run-id", "r-kill", "-p", f"marker={marker}"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr  # SIGKILL: no receipt, no handler ran
    receipts = work / "runs" / "r-kill" / "state" / "receipts"
    fragment = last_object((receipts / "train.json").read_bytes())
    assert [a["status"] for a in fragment["attempts"]] == ["killed"]
    assert last_object((receipts / "prepare.json").read_bytes())["status"] == "succeeded"
    assert not [p.name for p in receipts.iterdir() if not p.name.endswith(".json")]  # no temporary file

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


def test_a_retry_killed_mid_call_is_appended_to_the_existing_fragment(tmp_path: Path) -> None:
    source = tmp_path / f"killed_retry_{tmp_path.name.replace('-', '_')}.py"
    source.write_text(KILLED_ON_RETRY)
    work, marker = tmp_path / "work", tmp_path / "marker"
    argv = [sys.executable, "-m", "interlock.core.cli.main", "run", str(source), "--backend", "flyte-local",
            "--workdir", str(work), "--run-id", "r-retry", "-p", f"marker={marker}"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    receipts = work / "runs" / "r-retry" / "state" / "receipts"
    fragment = last_object((receipts / "train.json").read_bytes())
    assert [a["status"] for a in fragment["attempts"]] == ["failed", "killed"]
    assert fragment["attempts"][0]["failure"]["kind"] == "TRANSIENT"

    resumed = il.run(load_pipeline(str(source)), backend="flyte-local", workdir=work, run_id="r-retry",
                     marker=str(marker), progress=False)
    assert resumed.outputs == {"o0": 10}
    train = next(s for s in json.loads(Path(resumed.receipt_path).read_text())["steps"] if s["node"] == "train")
    assert [a["status"] for a in train["attempts"]] == ["failed", "killed", "succeeded"]
    assert not [p.name for p in receipts.iterdir() if not p.name.endswith(".json")]  # no temporary file


def _fragment(run_id: str, node: str, attempts: int) -> Fragment:
    from interlock.core.run.records import Attempt

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
def test_a_fragment_cut_short_is_absent_and_the_next_write_supersedes_it(tmp_path: Path, left: str) -> None:
    state = RunState(tmp_path / "state", "r")
    path = state.fragment_path("n")
    path.parent.mkdir(parents=True)
    path.write_text(left)  # a process killed between creating the file and writing it whole
    assert state.read_fragment("n") is None
    assert state.fragments(["n"]) == {}
    state.write_fragment(_fragment("r", "n", 1), new=True)  # "new" but a file is there: a record after it
    assert len(state.read_fragment("n").attempts) == 1


def test_a_record_cut_short_hides_neither_the_one_before_nor_the_one_after(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state", "r")
    path = state.write_fragment(_fragment("r", "n", 1), new=True)
    with open(path, "a") as f:  # an append killed mid-write: no newline at its end
        f.write('\n{"run_id": "r", "node": "n", "status": "succ')
    assert len(state.read_fragment("n").attempts) == 1  # the last whole record
    state.write_fragment(_fragment("r", "n", 2))  # the resumed run's next record starts a line
    assert len(state.read_fragment("n").attempts) == 2
    assert state.fragments(["n"])["n"].attempts[-1].number == 2


def test_last_object_reads_every_shape_a_file_can_have() -> None:
    assert last_object(b'{"a": 1}') == {"a": 1}  # one record, no newline (written whole, before appends)
    assert last_object(b'{"a": 1}\n') == {"a": 1}
    assert last_object(b'{"a": 1}\n\n{"a": 2}\n') == {"a": 2}
    assert last_object(b'{"a": 1}\n\n{"a": 2}\n\n{"a"') == {"a": 2}  # the third still being written
    assert last_object(b'{"a": 1}\n\n{"a"') == {"a": 1}
    assert last_object(b"") is None and last_object(b"\n\n") is None and last_object(b'{"a"') is None


def test_a_torn_record_that_ends_in_a_newline_is_passed_over() -> None:
    # A network volume can write a record's last page (its newline) before a page ahead of it:
    # what is left is a line that ends in a newline but does not parse, or holds zeros.
    assert last_object(b'{"a": 1}\n\n{"a": 2, "b": \x00\x00\x00\x00}\n') == {"a": 1}
    assert last_object(b'{"a": 1}\n\n\x00\x00\x00\n') == {"a": 1}
    assert last_object(b'{"a": 1}\n\n[1, 2]\n') == {"a": 1}  # only an object is a record


def test_append_record_makes_the_file_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "receipts" / "n.json"
    append_record(path, '{"a": 1}')
    append_record(path, '{"a": 2}')
    assert last_object(path.read_bytes()) == {"a": 2}
    assert [json.loads(line) for line in path.read_text().splitlines() if line] == [{"a": 1}, {"a": 2}]


def test_later_writes_append_and_the_last_record_is_the_fragment(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state", "r")
    path = state.write_fragment(_fragment("r", "n", 1), new=True)
    state.write_fragment(_fragment("r", "n", 2), new=True)  # one is there now: never overwritten in place
    assert len(state.read_fragment("n").attempts) == 2
    state.write_fragment(_fragment("r", "n", 3))
    assert len(state.read_fragment("n").attempts) == 3
    assert [len(json.loads(line)["attempts"]) for line in Path(path).read_text().splitlines() if line] == [1, 2, 3]
    # Another run's fragment in a reused state folder: its records are superseded, never merged.
    other = RunState(tmp_path / "state", "r2")
    assert other.read_fragment("n") is None
    other.write_fragment(_fragment("r2", "n", 1), new=True)
    assert len(other.read_fragment("n").attempts) == 1
    assert state.read_fragment("n") is None  # the last record is r2's: r's are no longer current
