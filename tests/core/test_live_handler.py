"""The capture's log handler is made once and put on the root logger for each captured step:
every step still gets its own records, and the root logger is left as it was between steps."""

from __future__ import annotations

import logging

from interlock.core.run import live


def test_each_step_gets_its_records_through_the_one_handler() -> None:
    got: list[live.StepLine] = []
    remove = live.add_sink(got.append)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        for node in ("a", "b", "a"):
            with live.capture(node):
                logging.getLogger("team.module").warning("from %s", node)
            assert root.handlers == before  # taken off after each step
    finally:
        remove()
    assert [(x.node, x.text) for x in got] == [("a", "from a"), ("b", "from b"), ("a", "from a")]
