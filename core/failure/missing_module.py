"""What to install when a step fails on a missing module.

A step that imports an optional library the environment lacks (``mlflow`` in a slim image,
``kfp`` on a laptop) is not a bug in the step and not worth a retry: the hint names the
interlock extra that ships the library, read from interlock's own package metadata, or says
to add the library to the step's image.
"""

from __future__ import annotations

import re
from importlib import metadata

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]")
_UMBRELLAS = frozenset({"all", "test", "lint"})  # extras of extras: never the narrowest answer


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_for(module: str) -> str | None:
    """The narrowest extra of interlock that installs ``module``'s distribution (its
    top-level import name read as a distribution name), or None."""
    try:
        requires = metadata.requires("interlock") or []
    except metadata.PackageNotFoundError:
        return None
    wanted = _normal(module.split(".", 1)[0])
    sizes: dict[str, int] = {}
    holders: set[str] = set()
    for line in requires:
        m = _REQUIREMENT.match(line)
        if m is None:
            continue
        dist, extra = _normal(m.group(1)), m.group(2)
        sizes[extra] = sizes.get(extra, 0) + 1
        if dist == wanted and extra not in _UMBRELLAS:
            holders.add(extra)
    return min(holders, key=lambda e: (sizes[e], e)) if holders else None


def install_hint(exc: BaseException) -> str | None:
    """The hint for a ``ModuleNotFoundError``: the extra to install, or the image to fix."""
    module = getattr(exc, "name", None)
    if not isinstance(module, str) or not module:
        return None
    top = module.split(".", 1)[0]
    extra = extra_for(top)
    where = "in the environment the step runs in (for a cluster, the step's image)"
    if extra is not None:
        return f"not retried: install it {where}: pip install 'interlock[{extra}]' (or pip install {top})"
    return f"not retried: install {top!r} {where}, e.g. add it to the image's requirements"
