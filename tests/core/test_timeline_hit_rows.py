"""A cache hit's timeline row keeps its name, dot and note between drawings (only its marker
follows its time): each drawing still shows that row's own place, name and note."""

from __future__ import annotations

import re

from interlock.core.report.svg_timeline import Row, timeline


def _marker_x(svg: str, node: str) -> float:
    row = svg[svg.index(f'data-node="{node}"'):]
    found = re.search(r'<path d="M([0-9.]+),[^"]*" fill="[^"]*" class="cache-hit"', row)
    assert found is not None, row
    return float(found.group(1))


def test_a_cache_hit_row_keeps_its_texts_and_moves_its_marker() -> None:
    first = timeline([Row("a<b", "cached", at=2.0, note="$0.01"), Row("c", "cached", at=8.0)], 0.0, 10.0)
    again = timeline([Row("c", "cached", at=2.0), Row("a<b", "cached", at=8.0, note="$0.01")], 0.0, 10.0)
    assert 'data-node="a&lt;b"' in first and ">a&lt;b</text>" in first and first.count("$0.01") == 1
    assert again.count("$0.01") == 1 and again.index('data-node="c"') < again.index('data-node="a&lt;b"')
    assert _marker_x(first, "a&lt;b") < _marker_x(first, "c")
    assert _marker_x(again, "a&lt;b") > _marker_x(again, "c")  # each marker at its own time, its own row
    assert first.count('class="row"') == again.count('class="row"') == 2
    assert "\x00" not in first + again
