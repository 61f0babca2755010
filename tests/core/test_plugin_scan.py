"""Entry points are scanned once while nothing is installed: a run asks two or three times
(its backend, the lineage provider), and each scan reads every installed distribution."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from interlock.core.base import plugins

GROUP = plugins.PluginGroup("interlock.test_scan", "thing", plugins.InterlockError, "no thing {name!r}", "")


def _dist(site: Path, name: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP.entry_point}]\n{name} = json:dumps\n")


def test_a_new_install_is_seen_and_nothing_is_rescanned_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _dist(site, "first_thing")
    monkeypatch.syspath_prepend(str(site))
    scans: list[str] = []
    real = importlib.metadata.entry_points

    def counting(**kw):  # noqa: ANN003, ANN202 - a pass-through
        scans.append(kw.get("group", ""))
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    assert list(plugins.installed(GROUP)) == ["first_thing"]
    assert list(plugins.installed(GROUP)) == ["first_thing"]
    assert len(scans) == 1  # the second answer came from the scan kept
    _dist(site, "second_thing")  # pip install: the site folder changes
    assert list(plugins.installed(GROUP)) == ["first_thing", "second_thing"]
    assert len(scans) == 2
