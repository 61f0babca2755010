"""A default (NCCL) ``il.Torchrun`` step run on a host without CUDA says so, before any rank
starts, with a hint that works here (issue 25, item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

import interlock as il
from interlock.core.run.devices import visible_gpus

pytestmark = pytest.mark.skipif(visible_gpus() > 0, reason="this host has CUDA GPUs: NCCL can run")


@il.step(distributed=il.Torchrun(nnodes=1, nproc_per_node=2))
def fit(n: int) -> int:
    return n


@il.pipeline(name="nccl-on-cpu")
def nccl_on_cpu(n: int = 1):
    return fit(n=n)


def test_nccl_on_a_cpu_host_is_refused_with_a_hint_that_works(tmp_path: Path) -> None:
    with pytest.raises(il.StepFailed) as raised:
        il.run(nccl_on_cpu, backend="local", workdir=tmp_path)
    err = raised.value
    assert err.kind is il.FailureKind.FATAL
    assert "Torchrun(backend='nccl') needs CUDA GPUs and this host has none" in err.reason
    assert "backend='auto'" in (err.hint or "") and "kubectl" not in (err.hint or "")
    assert not list(tmp_path.glob("runs/*/state/ranks"))  # no rank was started
