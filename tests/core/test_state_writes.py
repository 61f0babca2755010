"""State files written fast and read back the same (issue 12, item 2).

Fragments and the run's spec are written compact, by json's C encoder (``indent`` makes json
use its pure-Python encoder); the receipt one key and one step per line. A missing receipts
folder or a node without a fragment reads as no fragment, from one listing of the folder.
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path

from interlock.core.base.status import Status
from interlock.core.report.svg import el, esc
from interlock.core.run import live
from interlock.core.run.files import json_by_lines, write_text_atomic
from interlock.core.run.records import Fragment
from interlock.core.run.state import RunState


def test_json_by_lines_reads_back_as_the_same_object_one_list_item_per_line() -> None:
    data = {"steps": [{"node": "a", "facts": {"x": [1, 2]}}, {"node": "b\n\"q\""}], "git": {"sha": None},
            "cache_hits": [], "status": Status.SUCCEEDED, "path": Path("/x")}
    text = json_by_lines(data)
    assert json.loads(text) == json.loads(json.dumps(data, default=str))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    assert sum(1 for line in lines if line.startswith('  {"facts"') or line.startswith('  {"node"')) == 2


def test_fragments_are_found_by_listing_and_written_into_a_folder_made_on_demand(tmp_path: Path) -> None:
    state = RunState(tmp_path / "state", "r1")
    assert state.fragments(["a", "b"]) == {}  # no receipts folder yet
    state.write_fragment(Fragment(run_id="r1", node="a", step="a", status=Status.SUCCEEDED, started=1.0, ended=2.0))
    other = RunState(tmp_path / "state", "r0")
    assert set(state.fragments(["a", "b"])) == {"a"}
    assert other.fragments(["a"]) == {}  # another run's fragment is not this run's
    records = [line for line in state.fragment_path("a").read_text().splitlines() if line]
    assert len(records) == 1 and json.loads(records[0])["node"] == "a"  # one compact line per record
    write_text_atomic(tmp_path / "new" / "deeper" / "f.txt", "x")
    assert (tmp_path / "new" / "deeper" / "f.txt").read_text() == "x"


def test_esc_escapes_exactly_as_html_escape() -> None:
    for value in ("plain", "a<b>&\"c'", 3.5, 7, None, "", "x & y", "\u00e9\u2026"):
        assert esc(value) == html.escape(str(value), quote=True)
    assert el("rect", stroke_width="1", class_="a\"b") == '<rect stroke-width="1" class="a&quot;b"/>'


def test_capture_quiets_a_foreign_logger_that_inherits_from_a_root_it_raises(monkeypatch) -> None:  # noqa: ANN001
    """Root goes to INFO while a step is captured; a foreign logger that inherits its level
    must be at WARNING then, and everything is as it was afterwards."""
    root, foreign = logging.getLogger(), logging.getLogger("urllib3")
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    monkeypatch.setattr(foreign, "level", logging.NOTSET)
    remove = live.add_sink(lambda line: None)
    try:
        with live.verbosity(False), live.capture("step-a"):
            assert root.level == logging.INFO
            assert foreign.getEffectiveLevel() == logging.WARNING
            assert not foreign.isEnabledFor(logging.INFO)
            assert logging.getLogger("mine").isEnabledFor(logging.INFO)  # the caches saw the change
        assert (root.level, foreign.level) == (logging.WARNING, logging.NOTSET)
        assert not logging.getLogger("mine").isEnabledFor(logging.INFO)
    finally:
        remove()
