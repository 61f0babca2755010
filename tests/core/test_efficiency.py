"""The GPU efficiency ratio from attempt records: measured (NVML samples), estimated (no
samples), the thresholds, where the rest of the GPU time went, and a run's total."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from interlock.core.record.efficiency import GpuTime, describe, run_gpu_time, step_gpu_time, verdict
from interlock.core.run.usage import AttemptUsage, GpuSampler, gpu_present, timed_iter


def _attempt(duration: float, **usage: object) -> dict[str, object]:
    return {"duration_s": duration, "usage": usage}


def test_sampled_busy_time_gives_the_ratio_and_the_rest_is_split_by_cause() -> None:
    # 100 s on 2 GPUs = 200 GPU-s billed; NVML saw 150 busy GPU-s; 20 s data wait, 10 s checkpoints.
    t = step_gpu_time([_attempt(100.0, data_wait_s=20.0, checkpoint_s=10.0,
                                gpu={"source": "nvml", "devices": 2, "busy_gpu_s": 150.0, "utilization": 0.75})], gpus=2)
    eff = t.to_json()
    assert eff is not None
    assert eff["ratio"] == 0.75 and eff["verdict"] == "fair" and eff["source"] == "nvml"
    assert eff["billed_gpu_s"] == 200.0 and eff["busy_gpu_s"] == 150.0
    # data wait 40 GPU-s, checkpoints 20 GPU-s: more than the 50 not busy, so no idle left
    assert eff["rest"] == {"data_wait": 0.2, "checkpoint": 0.1, "idle": 0.0}


def test_without_samples_busy_time_is_billed_less_the_measured_stalls() -> None:
    t = step_gpu_time([_attempt(10.0, data_wait_s=3.0), _attempt(10.0, checkpoint_s=1.0)], gpus=1)
    assert (t.billed, t.busy, t.source) == (20.0, 16.0, "estimated")
    assert t.ratio == 0.8 and verdict(0.8) == "fair"
    assert "estimated without GPU samples" in describe(t.to_json())


def test_a_step_that_bills_no_gpu_has_no_ratio_and_a_run_sums_its_gpu_steps() -> None:
    assert step_gpu_time([_attempt(5.0, data_wait_s=1.0)], gpus=0).to_json() is None
    a = GpuTime(billed=100.0, busy=90.0, source="nvml")
    b = GpuTime(billed=300.0, busy=210.0, data_wait=60.0, source="nvml")
    run = run_gpu_time([a, GpuTime(), b])
    assert run.ratio == pytest.approx(0.75) and run.source == "nvml"  # 300 busy of 400 billed
    assert run_gpu_time([GpuTime()]).to_json() is None
    assert (verdict(0.86), verdict(0.85), verdict(0.70), verdict(0.69)) == ("good", "fair", "fair", "investigate")


def test_a_sampled_step_whose_ranks_each_saw_their_own_gpu_is_scaled_to_every_gpu_billed() -> None:
    # 4 ranks, one GPU each; the fragment's process saw 1 device, 0.9 busy over 10 s.
    t = step_gpu_time([_attempt(10.0, gpu={"source": "nvml", "devices": 1, "busy_gpu_s": 9.0})], gpus=4)
    assert (t.billed, t.busy) == (40.0, 36.0)


def test_the_line_a_person_reads() -> None:
    eff = GpuTime(billed=100.0, busy=60.0, data_wait=25.0, checkpoint=5.0, source="nvml").to_json()
    assert describe(eff) == ("GPU efficiency 60% (investigate; >85% good, <70% investigate): "
                             "the rest data wait 25%, checkpoint 5%, idle 10%")
    assert describe(None) == ""


def test_timed_data_counts_the_wait_for_each_item_not_the_work_on_it() -> None:
    usage = AttemptUsage()

    def slow():
        for i in range(3):
            time.sleep(0.05)
            yield i

    for _ in timed_iter(usage, slow()):
        time.sleep(0.05)  # work: not counted
    assert 0.15 <= usage.data_wait_s < 0.25


def test_the_gpu_sampler_integrates_utilization_over_time() -> None:
    # No GPU on this host: NVML's two calls the sampler makes, answered by a stand-in whose
    # utilization the test sets (the real NVML path runs on a GPU: benchmarks/gpu_train.py).
    level = {"gpu": 50}
    nvml = SimpleNamespace(nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=level["gpu"]))
    sampler = GpuSampler(every_s=0.01)
    sampler._start(["gpu0", "gpu1"], nvml)
    time.sleep(0.2)
    level["gpu"] = 100
    time.sleep(0.2)
    got = sampler.stop()
    assert got["source"] == "nvml" and got["devices"] == 2 and got["samples"] > 10
    assert 0.6 <= got["utilization"] <= 0.9  # half the time at 50%, half at 100%
    assert 0.45 <= got["busy_gpu_s"] <= 0.7  # 2 GPUs x (0.2 s x 0.5 + 0.2 s x 1.0) = 0.6
    assert not [t for t in threading.enumerate() if t.name == "interlock-gpu-sampler"]


def test_no_sampler_starts_on_a_host_without_a_gpu() -> None:
    if gpu_present():
        pytest.skip("this host has a GPU")
    assert GpuSampler.if_available() is None
