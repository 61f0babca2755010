"""Receipts tell the truth (issue 11, item 11): GPU-seconds billed from what ran, attempts
killed before a resume, no temporary directories left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import runnable_backends
from core_pipelines import receipts

import interlock as il
from interlock.core.run import devices
from interlock.core.run.files import last_object


def read(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def step_entry(receipt: dict, node: str) -> dict:
    return next(s for s in receipt["steps"] if s["node"] == node)


def test_a_step_that_ran_on_the_cpu_bills_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "visible_gpus", lambda: 0)  # a laptop: no CUDA
    run = il.run(receipts.billing, backend="local", workdir=tmp_path)
    receipt = read(run.receipt_path)
    reported = step_entry(receipt, "cpu_fallback")
    assert reported["gpus"] == {"requested": 2, "billed": 0, "device": {"type": "cpu", "count": 0, "source": "reported"}}
    assert reported["gpu_seconds"] == 0.0 and reported["duration_s"] > 0
    silent = step_entry(receipt, "silent_gpu_step")
    assert silent["gpus"] == {"requested": 1, "billed": 0, "device": {"type": "cpu", "count": 0, "source": "detected"}}
    assert silent["gpu_seconds"] == 0.0
    assert receipt["totals"]["gpu_seconds"] == 0.0
    # The cost is CPU and memory only: far below one H200 GPU for the same time.
    h200_per_s = 8.0 / 3600
    assert silent["estimated_cost_usd"] < h200_per_s * silent["duration_s"] / 10
    assert silent["facts"] == {}  # the device record is not a user fact


def test_visible_gpus_are_billed_when_the_step_does_not_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "visible_gpus", lambda: 1)  # a GPU node
    receipt = read(il.run(receipts.billing, backend="local", workdir=tmp_path).receipt_path)
    silent = step_entry(receipt, "silent_gpu_step")
    assert silent["gpus"]["billed"] == 1 and silent["gpus"]["device"]["source"] == "detected"
    assert silent["gpu_seconds"] == pytest.approx(silent["duration_s"], abs=1e-3)
    assert step_entry(receipt, "cpu_fallback")["gpus"]["billed"] == 0  # it said: CPU


@pytest.mark.parametrize(
    ("device", "count", "expected"),
    [("cuda", None, ("cuda", 1)), ("cuda:1", None, ("cuda", 1)), ("cuda", 4, ("cuda", 4)), ("cpu", None, ("cpu", 0)),
     ("mps", None, ("mps", 0))],
)
def test_device_records(device: str, count: int | None, expected: tuple[str, int]) -> None:
    rec = devices.device_record(device, count)
    assert (rec["type"], rec["count"]) == expected


def test_visible_gpus_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    import glob  # devices imports it where it looks (a task that requests no GPU never does)
    import sys

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0", "/dev/nvidia1"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert devices.visible_gpus() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert devices.visible_gpus() == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.visible_gpus() == 0
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert devices.visible_gpus() == 0


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


@il.pipeline(name="killed-once")
def killed_once(x: int = 1, marker: str = "m"):
    return train(x=prepare(x=x), marker=marker)
"""


def test_an_attempt_killed_before_a_resume_is_in_the_receipt(tmp_path: Path) -> None:
    import subprocess
    import sys

    from interlock.core.dsl.loader import load_pipeline

    source = tmp_path / f"killed_once_{tmp_path.name.replace('-', '_')}.py"
    source.write_text(KILLED_ONCE)
    work, marker = tmp_path / "work", tmp_path / "marker"
    argv = [sys.executable, "-m", "interlock.core.cli.main", "run", str(source), "--workdir", str(work),
            "--run-id", "r-kill", "-p", f"marker={marker}"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr  # SIGKILL: no receipt, no handler
    fragment = last_object((work / "runs" / "r-kill" / "state" / "receipts" / "train.json").read_bytes())
    assert [a["status"] for a in fragment["attempts"]] == ["killed"]

    resumed = il.run(load_pipeline(str(source)), backend="local", workdir=work, run_id="r-kill", marker=str(marker))
    assert resumed.outputs == {"o0": 20}
    train = step_entry(read(resumed.receipt_path), "train")
    assert [a["status"] for a in train["attempts"]] == ["killed", "succeeded"]
    assert "no end was recorded" in train["attempts"][0]["decision"]
    assert train["status"] == "succeeded"


@pytest.mark.parametrize("backend", runnable_backends())
def test_no_temporary_directory_outlives_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str,
) -> None:
    import tempfile

    from core_pipelines import integrity

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the steps' own processes (kfp-local)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # this process
    result = il.run(integrity.scratch_free, backend=backend, workdir=tmp_path / "work", n=8)
    assert result.outputs == {"o0": 8}
    left = sorted(p.name for p in scratch.iterdir() if p.name.startswith("interlock-"))
    assert left == [], left
    if backend == "local":
        assert list(scratch.iterdir()) == []
