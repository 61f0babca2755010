"""The join rules' table (core/model/joins.py): what each rule decides from how the upstreams ended."""

from __future__ import annotations

import pytest

from interlock.core.base.status import Status
from interlock.core.model.joins import RunIf, join_blocked

OK, SKIP, FAIL = Status.SUCCEEDED, Status.SKIPPED, Status.FAILED
# upstream statuses -> what each rule gives: None (it runs), or the status it ends with
TABLE = [
    ({"a": OK, "b": OK}, dict.fromkeys(RunIf, None)),
    ({"a": OK, "b": SKIP}, {RunIf.NONE_FAILED: None, RunIf.ALL_SUCCEEDED: SKIP, RunIf.ANY_SUCCEEDED: None,
                            RunIf.ONE_SUCCEEDED: None, RunIf.ALL_DONE: None}),
    ({"a": SKIP, "b": SKIP}, {RunIf.NONE_FAILED: None, RunIf.ALL_SUCCEEDED: SKIP, RunIf.ANY_SUCCEEDED: SKIP,
                              RunIf.ONE_SUCCEEDED: SKIP, RunIf.ALL_DONE: None}),
    ({"a": OK, "b": FAIL}, {RunIf.NONE_FAILED: Status.NOT_RUN, RunIf.ALL_SUCCEEDED: Status.NOT_RUN,
                            RunIf.ANY_SUCCEEDED: Status.NOT_RUN, RunIf.ONE_SUCCEEDED: None, RunIf.ALL_DONE: None}),
    ({"a": SKIP, "b": FAIL}, {RunIf.NONE_FAILED: Status.NOT_RUN, RunIf.ALL_SUCCEEDED: Status.NOT_RUN,
                              RunIf.ANY_SUCCEEDED: Status.NOT_RUN, RunIf.ONE_SUCCEEDED: Status.NOT_RUN,
                              RunIf.ALL_DONE: None}),
    ({"a": Status.CACHED, "b": Status.NOT_RUN}, {RunIf.NONE_FAILED: Status.NOT_RUN, RunIf.ALL_SUCCEEDED: Status.NOT_RUN,
                                                 RunIf.ANY_SUCCEEDED: Status.NOT_RUN, RunIf.ONE_SUCCEEDED: None,
                                                 RunIf.ALL_DONE: None}),
]


@pytest.mark.parametrize(("upstream", "want"), TABLE)
def test_each_rule_decides_as_its_airflow_trigger_rule(upstream: dict[str, Status], want: dict[RunIf, Status]) -> None:
    got = {rule: (None if (d := join_blocked(rule, upstream, set())) is None else d[0]) for rule in RunIf}
    assert got == want


def test_the_default_rule_skips_a_reader_of_a_skipped_step_but_not_one_that_only_runs_after_it() -> None:
    assert join_blocked(RunIf.NONE_FAILED, {"a": SKIP}, reads={"a"}) == (
        Status.SKIPPED, "a was skipped: its output does not exist")
    assert join_blocked(RunIf.NONE_FAILED, {"a": SKIP}, reads=set()) is None


def test_a_step_without_upstreams_always_runs() -> None:
    assert all(join_blocked(rule, {}, set()) is None for rule in RunIf)
