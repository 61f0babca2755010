"""Portable artifact types: directories and metrics that cross step boundaries without pickle.

``Dataset`` and ``Model`` are directories plus a small JSON-able metadata dict; each backend
moves the directory (Flyte ``FlyteDirectory``, a KFP ``Dataset``/``Model`` artifact) and the
runtime shim hands the step a local path. ``Metrics`` is a flat mapping of name to number.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from interlock.core.base.scratch import make_temp_dir


class _DirectoryArtifact:
    kind = "artifact"

    def __init__(self, path: str | os.PathLike[str] | None = None, metadata: Mapping[str, Any] | None = None):
        if path is None:  # scratch: removed when the run ends, after the port holds a copy
            path = make_temp_dir(f"interlock-{self.kind}-")
        self.path = Path(path)
        self.metadata: dict[str, Any] = dict(metadata or {})

    @classmethod
    def new(cls, metadata: Mapping[str, Any] | None = None) -> _DirectoryArtifact:
        """A fresh, empty directory to write the artifact into."""
        return cls(None, metadata)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, metadata={self.metadata!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.path == other.path
            and self.metadata == other.metadata
        )

    __hash__ = None  # type: ignore[assignment]


class Dataset(_DirectoryArtifact):
    """A directory of data files (KFP ``system.Dataset``, Flyte ``FlyteDirectory``)."""

    kind = "dataset"


class Model(_DirectoryArtifact):
    """A directory holding a trained model (KFP ``system.Model``)."""

    kind = "model"


class Metrics(Mapping[str, float]):
    """Named scalar metrics (KFP ``system.Metrics``). Values must be finite-or-not floats."""

    def __init__(self, values: Mapping[str, float] | None = None, **kw: float):
        merged = {**dict(values or {}), **kw}
        for k, v in merged.items():
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int | float):
                raise TypeError(f"Metrics takes str -> number; got {k!r}: {v!r}")
        self._values = {k: float(v) for k, v in merged.items()}

    def __getitem__(self, key: str) -> float:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> float:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict[str, float]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"Metrics({self._values!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._values) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
