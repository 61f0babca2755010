"""Kubernetes-safe names for templates, tasks and parameters, unique within their scope."""

from __future__ import annotations

import re

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_PARAM = re.compile(r"[^A-Za-z0-9_-]+")


def dns(name: str, limit: int = 63) -> str:
    """A DNS-1123 label: ``count-words.split`` -> ``count-words-split``."""
    out = _NOT_DNS.sub("-", name.lower()).strip("-")[:limit].strip("-")
    return out or "x"


def param(name: str) -> str:
    return _NOT_PARAM.sub("-", name)


class Names:
    """Hands out unique names: a second ``a.b`` and ``a-b`` get ``a-b-2``."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def take(self, name: str, limit: int = 63) -> str:
        base = dns(name, limit - 4)
        out, i = base, 2
        while out in self._taken:
            out, i = f"{base}-{i}", i + 1
        self._taken.add(out)
        return out
