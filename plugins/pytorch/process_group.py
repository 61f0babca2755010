"""The env:// rendezvous that torchrun, torch elastic and the training operator all set up."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager

from interlock.core.model.policies_opt_in import Torchrun


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_rank_zero() -> bool:
    """Only rank 0 writes outputs, receipts and registry entries; the others just train."""
    return rank() == 0


def collective_backend(t: Torchrun) -> str:
    """The backend this rank joins with: Torchrun's, or for "auto" nccl when CUDA is visible."""
    if t.backend != "auto":
        return t.backend
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def host_cannot_run(t: Torchrun, gpus: int) -> str | None:
    """Why ranks started on this host (a local run, ``gpus`` visible) would fail at once, or None.

    NCCL needs CUDA: on a CPU host every rank dies in ``init_process_group`` before the shim can
    record anything, which reads like a failed cluster job. Say it before launching.
    """
    if t.backend == "nccl" and gpus == 0:
        return "Torchrun(backend='nccl') needs CUDA GPUs and this host has none"
    return None


@contextmanager
def process_group(t: Torchrun | None) -> Iterator[None]:
    """Join the process group the launcher prepared (env:// rendezvous), once per worker."""
    if t is None or "WORLD_SIZE" not in os.environ:
        yield
        return
    import torch.distributed as dist

    owned = not dist.is_initialized()
    if owned and type(multiprocessing.current_process()).__name__ == "ForkProcess":
        # A forked rank (torch elastic's start_method="fork", for CPU tests) inherits the
        # parent's OpenMP state without its threads: its first parallel kernel would wait for
        # them forever. One thread per rank needs no pool (ranks are the parallelism anyway).
        import torch

        torch.set_num_threads(1)
    if owned:
        backend = collective_backend(t)
        if t.timeout_s is not None:
            from datetime import timedelta

            dist.init_process_group(backend=backend, timeout=timedelta(seconds=t.timeout_s))
        else:
            dist.init_process_group(backend=backend)
    try:
        yield
    finally:
        if owned and dist.is_initialized():
            dist.destroy_process_group()
