"""Plugin discovery: one helper for every entry-point group, one way to fail.

Backends, checkpoint stores and lineage providers are found by entry point and loaded only
when used; a missing one lists what is installed, a broken one names the extra to install,
and an object of the wrong kind names the protocol it misses.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.core.backend.protocol import get_backend
from interlock.core.base import plugins
from interlock.core.base.errors import (
    BackendNotFound,
    CheckpointError,
    InterlockError,
    LineageUnavailable,
)
from interlock.core.checkpoint.store import store_for_uri
from interlock.core.record.lineage import lineage_provider


class _BrokenEntryPoint:
    """Looks like an entry point whose plugin's dependencies are not installed."""

    def load(self) -> Any:
        raise ImportError("No module named 'boto3'")


# group, how core asks for plugin NAME, the error class that group raises
GROUPS: list[tuple[plugins.PluginGroup, Callable[[str], Any], type[InterlockError]]] = [
    (plugins.BACKENDS, get_backend, BackendNotFound),
    (plugins.CHECKPOINT_STORES, lambda name: store_for_uri(f"{name}://bucket/prefix"), CheckpointError),
    (plugins.LINEAGE, lineage_provider, LineageUnavailable),
]
IDS = [g.entry_point for g, _, _ in GROUPS]


@pytest.mark.parametrize(("group", "ask", "error"), GROUPS, ids=IDS)
def test_a_broken_plugin_names_the_extra_to_install(
    group: plugins.PluginGroup, ask: Callable[[str], Any], error: type[InterlockError],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(plugins.registry(group), "nimbus-fast", _BrokenEntryPoint())
    with pytest.raises(error) as info:
        ask("nimbus-fast")
    assert info.value.message == (
        f"{group.noun} 'nimbus-fast' is registered but cannot be imported: No module named 'boto3'"
    )
    assert info.value.hint == "install its extra: pip install 'interlock[nimbus]'"
    assert isinstance(info.value.__cause__, ImportError)


def test_a_broken_plugin_of_another_package_names_that_package(monkeypatch: pytest.MonkeyPatch) -> None:
    class Dist:
        name = "acme-interlock-ray"

    broken = _BrokenEntryPoint()
    broken.dist = Dist()  # type: ignore[attr-defined]
    monkeypatch.setitem(plugins.registry(plugins.BACKENDS), "ray", broken)
    with pytest.raises(BackendNotFound) as info:
        get_backend("ray")
    assert info.value.hint == "install the dependencies of 'acme-interlock-ray': pip install 'acme-interlock-ray'"


@pytest.mark.parametrize(("group", "ask", "error"), GROUPS, ids=IDS)
def test_an_unknown_plugin_lists_the_installed_ones(
    group: plugins.PluginGroup, ask: Callable[[str], Any], error: type[InterlockError],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(plugins.registry(group), "zz-registered", object())
    with pytest.raises(error) as info:
        ask("nope")
    message = info.value.message
    assert message.startswith(group.unknown.format(name="nope") + "; installed: ")
    installed = message.split("; installed: ", 1)[1].split(", ")
    assert installed == sorted(installed) and "zz-registered" in installed
    assert installed == list(plugins.installed(group))
    assert info.value.hint == group.install_hint


@pytest.mark.parametrize(("group", "ask", "error"), GROUPS[::2], ids=IDS[::2])
def test_an_object_of_the_wrong_kind_names_the_protocol(
    group: plugins.PluginGroup, ask: Callable[[str], Any], error: type[InterlockError],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(plugins.registry(group), "odd", lambda: object())
    with pytest.raises(error, match=rf"{group.noun} 'odd' does not implement the \w+ protocol"):
        ask("odd")


def test_a_registered_plugin_wins_over_an_entry_point_of_the_same_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.core.backend.protocol import Capabilities

    class Shadow:
        name = "local"

        def capabilities(self) -> Capabilities:
            return Capabilities(backend="local", features={})

        def compile(self, spec: Any, out: Path, **options: Any) -> list[Path]:
            return []

    assert type(get_backend("local")).__name__ == "LocalBackend"  # the entry point
    monkeypatch.setitem(plugins.registry(plugins.BACKENDS), "local", Shadow)
    assert isinstance(get_backend("local"), Shadow)


def test_the_store_scheme_is_looked_up_by_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    class MemoryStore:
        @classmethod
        def from_uri(cls, uri: str) -> MemoryStore:
            made.append(uri)
            return cls()

    monkeypatch.setitem(plugins.registry(plugins.CHECKPOINT_STORES), "mem", MemoryStore)
    assert isinstance(store_for_uri("mem://team/ckpts"), MemoryStore)
    assert made == ["mem://team/ckpts"]


def test_discovery_is_not_paid_for_at_import_time() -> None:
    # importlib.metadata costs ~40 ms: only looking a plugin up may import it.
    code = (
        "import sys, interlock, interlock.core.cli.main, interlock.core.base.plugins, interlock.core.record.lineage\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]  # this checkout's code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_core_names_no_plugin() -> None:
    """Core reaches plugins through entry points only: no plugin's name, flag or store path."""
    core = Path(__file__).resolve().parents[2] / "core"
    offenders = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(core.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"mlmd|ml.metadata|plugins\.(s3|mlmd|mlflow|pandera)", line, re.I)
    ]
    assert offenders == []
