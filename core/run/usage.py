"""What one attempt of a step used, beyond its wall time: time spent waiting for data, time
spent writing checkpoints, and how busy its GPUs were.

A step says when it waits for data (``with ctx.waiting_for_data():`` around a fetch, or
``for batch in ctx.timed_data(loader):``); the shim's checkpointer times every save; a
sampler reads GPU utilization from NVML while the attempt runs, only where a GPU is present
and ``nvidia-ml-py`` is installed (nothing is loaded, sampled or reported on a CPU host).
The attempt's record keeps the totals (``Attempt.usage``); the receipt turns them into the
GPU efficiency ratio (core/record/efficiency.py).
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("interlock.usage")

SAMPLE_EVERY_S = 0.5  # NVML's utilization is itself averaged over 1/6 s to 1 s


@dataclass
class AttemptUsage:
    """Counters of one attempt; a step's code adds to them through its context."""

    data_wait_s: float = 0.0
    checkpoint_s: float = 0.0
    checkpoints: int = 0
    gpu: dict[str, Any] = field(default_factory=dict)  # GpuSampler.summary()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_data_wait(self, seconds: float) -> None:
        with self._lock:  # a DataLoader's worker thread may report too
            self.data_wait_s += max(0.0, seconds)

    def add_checkpoint(self, seconds: float) -> None:
        with self._lock:
            self.checkpoint_s += max(0.0, seconds)
            self.checkpoints += 1

    def to_dict(self) -> dict[str, Any]:
        """The attempt record's ``usage``: only what was measured (an empty dict when nothing)."""
        out: dict[str, Any] = {}
        if self.data_wait_s:
            out["data_wait_s"] = round(self.data_wait_s, 6)
        if self.checkpoints:
            out["checkpoint_s"] = round(self.checkpoint_s, 6)
            out["checkpoints"] = self.checkpoints
        if self.gpu:
            out["gpu"] = dict(self.gpu)
        return out


@contextmanager
def timed_wait(usage: AttemptUsage) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        usage.add_data_wait(time.perf_counter() - t0)


def timed_iter(usage: AttemptUsage, items: Iterable[Any]) -> Iterator[Any]:
    """``items``, counting the time each ``next()`` takes as data wait (a DataLoader's fetch)."""
    it = iter(items)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            usage.add_data_wait(time.perf_counter() - t0)
            return
        usage.add_data_wait(time.perf_counter() - t0)
        yield item


@functools.cache  # asked at every attempt; listing /dev costs a tenth of a millisecond, and its devices stay put
def gpu_present() -> bool:
    """An NVIDIA device node exists (the same test the receipt's device detection makes)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _visible_indices(count: int) -> list[int]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    picked = [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if all(p.isdigit() for p in picked):
        return [int(p) for p in picked if int(p) < count]
    return list(range(min(count, len(picked))))  # UUIDs or MIG names: the first N devices


class GpuSampler:
    """Reads each visible GPU's utilization from NVML every ``every_s`` seconds in a daemon
    thread, from ``start()`` to ``stop()``; ``summary()`` gives busy GPU-seconds (utilization
    integrated over time, summed over the devices) and the mean utilization."""

    def __init__(self, every_s: float = SAMPLE_EVERY_S) -> None:
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy_s = 0.0
        self._util_sum = 0.0
        self._samples = 0
        self._devices = 0

    @classmethod
    def if_available(cls) -> GpuSampler | None:
        """A started sampler when a GPU and NVML are both here; None otherwise (quietly)."""
        if not gpu_present():
            return None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except Exception as exc:  # noqa: BLE001 - no NVML, no driver: no samples, no error
            log.debug("no GPU utilization samples: %s", exc)
            return None
        sampler = cls()
        sampler._start([pynvml.nvmlDeviceGetHandleByIndex(i) for i in _visible_indices(count)], pynvml)
        return sampler

    def _start(self, handles: list[Any], nvml: Any) -> None:
        self._devices = len(handles)

        def sample() -> None:
            last = time.monotonic()
            while True:
                try:
                    utils = [nvml.nvmlDeviceGetUtilizationRates(h).gpu / 100.0 for h in handles]
                except Exception:  # noqa: BLE001 - a device lost mid-run: keep what was read
                    return
                now = time.monotonic()
                self._busy_s += sum(utils) * (now - last)
                self._util_sum += sum(utils) / max(1, len(utils))
                self._samples += 1
                last = now
                if self._stop.wait(self.every_s):
                    return

        self._thread = threading.Thread(target=sample, name="interlock-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.every_s + 1)
        return self.summary()

    def summary(self) -> dict[str, Any]:
        if not self._samples:
            return {}
        return {
            "source": "nvml",
            "devices": self._devices,
            "samples": self._samples,
            "utilization": round(self._util_sum / self._samples, 4),
            "busy_gpu_s": round(self._busy_s, 3),
        }
