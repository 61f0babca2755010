"""Deterministic kernels without loading torch's compiler stack.

``torch.use_deterministic_algorithms`` imports ``torch._inductor.config`` to set one flag
for ``torch.compile``; that import pulls in inductor and costs ~1-2.5 s per process (every
step, every rank) for code that never compiles. ``deterministic_algorithms`` sets the same
two switches: the eager flag directly, and inductor's flag in its config when inductor is
already loaded, else through the ``TORCHINDUCTOR_DETERMINISTIC`` variable its config reads
when it loads later. Same guarantees, no compiler import::

    from interlock.plugins.pytorch.determinism import deterministic_algorithms

    deterministic_algorithms(True)                  # as torch.use_deterministic_algorithms(True)
    deterministic_algorithms(True, warn_only=True)
"""

from __future__ import annotations

import os
import sys

INDUCTOR_CONFIG = "torch._inductor.config"
INDUCTOR_ENV = "TORCHINDUCTOR_DETERMINISTIC"  # read once, when torch._inductor.config loads


def deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """``torch.use_deterministic_algorithms(mode, warn_only=...)`` minus the inductor import."""
    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # a torch without the private setter: the public call (slow, same effect)
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    inductor = sys.modules.get(INDUCTOR_CONFIG)
    if inductor is not None:
        inductor.deterministic = mode  # type: ignore[attr-defined]  # a config module, attributes set at import
    else:
        os.environ[INDUCTOR_ENV] = "1" if mode else "0"
    setter(mode, warn_only=warn_only)
