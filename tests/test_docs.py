"""Docs that run (issue 24, "Deliver" 5): every fenced Python block in docs/ and the README is
one of three kinds, written in its info string:

- ```python: a complete program, run here as a script in a temporary directory;
- ```python tested-in=tests/PATH.py: a complete program that test runs (it needs a server, a
  signal or other set-up this file does not make), checked here to name this doc;
- ```python fragment: a piece of a program (a decorator, a line of a call), not run.

No block is left unmarked-and-unrun, and no placeholder or stale comment survives.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from doc_blocks import ROOT, Block, every_block

DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
ALL = every_block()
RUN_HERE = [b for b in ALL if b.info == ""]


def test_every_block_says_what_it_is() -> None:
    bad = [f"{b.id} ```python {b.info}" for b in ALL
           if b.info not in ("", "fragment") and not b.info.startswith("tested-in=")]
    assert not bad, f"unknown info strings (use fragment or tested-in=tests/...): {bad}"


@pytest.mark.parametrize("block", [b for b in ALL if b.info.startswith("tested-in=")], ids=lambda b: b.id)
def test_a_block_tested_elsewhere_names_a_test_that_reads_its_doc(block: Block) -> None:
    test = ROOT / block.info.removeprefix("tested-in=")
    assert test.is_file(), f"{block.id}: {test} does not exist"
    assert block.doc.name in test.read_text(), f"{block.id}: {test} does not read {block.doc.name}"


@pytest.mark.parametrize("block", [b for b in ALL if b.info == "fragment"], ids=lambda b: b.id)
def test_a_fragment_is_not_empty(block: Block) -> None:
    assert block.code.strip(), f"{block.id}: an empty block"


@pytest.mark.parametrize("block", RUN_HERE, ids=lambda b: b.id)
def test_a_complete_block_runs_as_written(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # its runs, caches and files land here
    monkeypatch.setenv("INTERLOCK_WORKDIR", str(tmp_path / ".interlock"))
    monkeypatch.syspath_prepend(str(ROOT))  # `from reference_pipelines import ...`, as from a checkout
    path = tmp_path / f"doc_block_{block.line}.py"
    path.write_text(block.code)
    runpy.run_path(str(path), run_name="__main__")


def test_no_placeholder_or_stale_comment_is_left() -> None:
    stale = re.compile(r"once exported|written by the .* work of issue|\bTODO\b|\bTBD\b")
    found = [f"{d.relative_to(ROOT)}:{i}" for d in [*DOCS, *ROOT.glob("docs/examples/*.py")]
             for i, line in enumerate(d.read_text().splitlines(), 1) if stale.search(line)]
    assert not found, found
