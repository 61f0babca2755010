"""Distributed PyTorch, backend-neutral: join the process group a launcher prepared.

The launchers differ by backend (torch elastic / a PyTorchJob through
flytekitplugins-kfpytorch on Flyte); what a step's process does once started does not.
torch is imported only when a process group is actually joined.
"""

from .process_group import is_rank_zero, process_group, rank, world_size

__all__ = ["is_rank_zero", "process_group", "rank", "world_size"]
