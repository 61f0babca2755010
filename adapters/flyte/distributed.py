"""Distributed PyTorch steps: task configs from flytekitplugins-kfpytorch, and the process group.

``il.Torchrun`` renders as torch elastic (``Elastic``) whenever it needs a launcher: several
processes per node, or an elastic node range. Only a fixed multi-node world with one process
per pod renders as a plain ``PyTorch`` job (the training operator starts one process per pod).
"""

from __future__ import annotations

from typing import Any

from interlock.core.model.policies_opt_in import Torchrun
from interlock.plugins.pytorch import process_group, rank

__all__ = ["process_group", "rank", "task_config"]


def task_config(t: Torchrun, *, spawn: bool = True) -> Any:
    from flytekitplugins.kfpytorch import Elastic, PyTorch, Worker  # registers the task plugins

    if t.elastic or t.nproc_per_node > 1 or t.nnodes == 1:
        nnodes: int | str = f"{t.min_nodes}:{t.nnodes}" if t.elastic else t.nnodes
        return Elastic(
            nnodes=nnodes,
            nproc_per_node=t.nproc_per_node,
            max_restarts=t.max_restarts,
            # spawn is what CUDA needs; fork only for CPU tests that must not re-import the world.
            start_method="spawn" if spawn else "fork",
            monitor_interval=5 if spawn else 1,  # local CPU runs: notice finished workers sooner
            increase_shared_mem=False,  # the task's shared_memory does it (the plugin flag is deprecated)
        )
    # A fixed world, one process per pod: master + (nnodes - 1) workers.
    return PyTorch(worker=Worker(replicas=t.nnodes - 1), increase_shared_mem=False)
