"""Timeline rows without attempts are kept between drawings (a cached rerun draws the same
ones run after run): each drawing must still show that row's own place, status and note."""

from __future__ import annotations

import re

from interlock.core.report.svg_timeline import Row, timeline


def _rows(svg: str) -> list[tuple[str, str]]:
    return re.findall(r'<g class="row" data-node="([^"]+)" data-status="([^"]+)"', svg)


def _row_svg(svg: str) -> str:
    return svg[svg.index('<g class="row"'):]


def test_a_kept_row_follows_its_status_note_and_place() -> None:
    first = timeline([Row("s0", "cached"), Row("s1", "skipped")], 0.0, 1.0)
    again = timeline([Row("s0", "cached"), Row("s1", "skipped")], 5.0, 9.0)  # times move nothing here
    assert _row_svg(first) == _row_svg(again)  # the axis moves; the rows do not
    assert _rows(first) == [("s0", "cached"), ("s1", "skipped")]
    assert "skipped: its gate was false" in first
    swapped = timeline([Row("s1", "not-run", note="3 attempt(s)"), Row("s0", "cached")], 0.0, 1.0)
    assert _rows(swapped) == [("s1", "not-run"), ("s0", "cached")]
    assert "not run: an earlier failure stopped the run" in swapped and "3 attempt(s)" in swapped
    assert "3 attempt(s)" not in first


def test_a_cache_hit_with_a_time_is_drawn_at_its_time() -> None:
    early = timeline([Row("s0", "cached", at=1.0)], 0.0, 10.0)
    late = timeline([Row("s0", "cached", at=9.0)], 0.0, 10.0)
    assert 'class="cache-hit"' in early and early != late


def test_an_attempt_without_an_end_followed_by_another_still_draws() -> None:
    # A killed attempt records no end (its fragment was written before the call); the resumed
    # run's next attempt follows it in the same row. The report once raised a TypeError here.
    killed = {"number": 1, "started": 1.0, "ended": None, "status": "running"}
    resumed = {"number": 2, "started": 6.0, "ended": 8.0, "status": "succeeded"}
    svg = timeline([Row("train", "succeeded", attempts=[killed, resumed])], 0.0, 10.0)
    assert svg.count('class="attempt attempt-') == 2
    assert 'class="wait"' not in svg  # no recorded end: no wait to draw between the two
