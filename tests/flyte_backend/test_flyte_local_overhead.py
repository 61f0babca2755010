"""What flyte-local does once per process or off the critical path (issue 12, item 2), and
that doing it so changes nothing a run records.

flytekit opens its local cache once per process; flyte-local keeps its cache store open per
cache directory too, but must reopen it when the directory was removed (a new work
directory at the same path) rather than serve a store whose files are gone. The receipt's
git lookup runs while the steps do; the receipt still records what ``git_info`` says.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import diskcache
import pytest
from flyte_pipelines.basic import demo

import interlock as il
from interlock.core.record import receipt as receipt_mod
from interlock.core.record.receipt import code_files, git_info


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real_init = diskcache.Cache.__init__

    def counting(self, directory=None, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(str(directory))
        return real_init(self, directory, *args, **kwargs)

    monkeypatch.setattr(diskcache.Cache, "__init__", counting)
    return seen


def test_the_cache_store_is_opened_once_per_directory_and_again_when_it_was_removed(
    tmp_path: Path, opened: list[str],
) -> None:
    spec = dataclasses.replace(demo.spec)
    work = tmp_path / "w"
    first = il.run(spec, backend="flyte-local", workdir=work, snapshot="s1", progress=False)
    second = il.run(spec, backend="flyte-local", workdir=work, snapshot="s1", progress=False)
    assert len(opened) == 1, opened  # the rerun found the store open
    assert {s.status for s in second.steps.values()} >= {"cached"}

    shutil.rmtree(work)  # a fresh work directory at the same path: nothing is cached there
    third = il.run(spec, backend="flyte-local", workdir=work, snapshot="s1", progress=False)
    assert len(opened) == 2, opened
    assert "cached" not in {s.status for s in third.steps.values()}
    assert third.outputs["o0"] == first.outputs["o0"]
    fourth = il.run(spec, backend="flyte-local", workdir=work, snapshot="s1", progress=False)
    assert {s.status for s in fourth.steps.values()} >= {"cached"}  # the reopened store holds third's


def test_the_receipt_records_what_git_info_says_with_the_lookup_started_early(tmp_path: Path) -> None:
    spec = dataclasses.replace(demo.spec)
    r = il.run(spec, backend="flyte-local", workdir=tmp_path / "w", snapshot="g1", progress=False)
    recorded = json.loads(Path(r.receipt_path).read_text())["git"]
    assert recorded == git_info(None, code_files(spec))
    assert recorded["sha"]  # the test suite runs from a checkout
    assert not receipt_mod._LOOKUPS  # the run took the lookup it started


def test_a_lookup_nobody_took_is_replaced_not_served_to_other_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = dataclasses.replace(demo.spec)
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "a" * 40)
    receipt_mod.prefetch_git_info(spec)  # a run that failed before its receipt
    monkeypatch.setenv("INTERLOCK_GIT_SHA", "b" * 40)
    r = il.run(spec, backend="flyte-local", workdir=tmp_path / "w", snapshot="g2", progress=False)
    assert json.loads(Path(r.receipt_path).read_text())["git"] == {"sha": "b" * 40, "dirty": False}
