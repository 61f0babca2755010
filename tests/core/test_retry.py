"""Retry policy validation and the per-kind retry decisions the runtime shim takes."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest
import torch
import torch.distributed
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.core.base.errors import PolicyError, ValidationFailed
from interlock.core.base.status import FailureKind
from interlock.core.failure.decisions import Decision, RetryTracker, decide
from interlock.core.failure.record import Failure
from interlock.core.failure.rules import classify
from interlock.core.failure.taxonomy import Preempted
from interlock.core.model.backoff import Backoff
from interlock.core.model.retry import MAX_OOM_HALVINGS, Retry

WATCHDOG = "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)"

# Failures classified from real exception objects, as the runtime would produce them.
NCCL = classify(torch.distributed.DistBackendError(WATCHDOG))
RESET = classify(ConnectionResetError(104, "Connection reset by peer"))
NO_GPU = classify(RuntimeError("0/8 nodes are available: 8 Insufficient nvidia.com/gpu."))
SPOT = classify(Preempted())
OOM = classify(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB"))
XID = classify(RuntimeError("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."))
BUG = classify(ValueError("shapes (32,10) and (12,) not aligned"))
BAD_DATA = classify(ValidationFailed("12 rows fail amount >= 0"))


def test_fixture_failures_have_the_expected_kinds():
    kinds = [f.kind for f in (NCCL, RESET, NO_GPU, SPOT, OOM, XID, BUG, BAD_DATA)]
    T, C, F, P = FailureKind.TRANSIENT, FailureKind.CONTENTION, FailureKind.FATAL, FailureKind.PREEMPTED
    assert kinds == [T, T, C, P, F, F, F, F]


# --------------------------------------------------------------------------- Backoff


def test_default_backoff_delays_double_from_five_minutes_and_cap_at_an_hour():
    b = Backoff()
    assert (b.attempts, b.first_s, b.factor, b.max_delay_s, b.max_total_s) == (4, 300.0, 2.0, 3600.0, 21600.0)
    assert [b.delay(n) for n in range(1, 8)] == [300, 600, 1200, 2400, 3600, 3600, 3600]
    assert b.delays() == (300, 600, 1200, 2400)


def test_delays_stop_where_max_total_would_be_passed():
    b = Backoff(attempts=10, first="1m", factor=2, max_delay="1h", max_total="10m")
    assert b.delays() == (60, 120, 240)  # 7m waited; the next 8m would make 15m
    assert Backoff(attempts=3, first="1m", max_total=None).delays() == (60, 120, 240)


def test_factor_one_is_a_constant_delay_and_huge_n_does_not_overflow():
    assert [Backoff(first="30s", factor=1).delay(n) for n in (1, 2, 50)] == [30, 30, 30]
    b = Backoff(first=1, factor=10, max_delay="2d", max_total=None)
    assert b.delay(10**6) == 172800.0


@pytest.mark.parametrize("n", [0, -1, 1.0, True])
def test_delay_needs_a_positive_retry_number(n):
    with pytest.raises(ValueError, match="counts retries from 1"):
        Backoff().delay(n)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"attempts": -1}, "attempts=-1"),
        ({"attempts": 101}, "attempts=101"),
        ({"attempts": 2.0}, "attempts=2.0"),
        ({"attempts": True}, "attempts=True"),
        ({"first": "0s"}, "first='0s'"),
        ({"first": 0}, "first=0"),
        ({"first": "5 min"}, "first='5 min'"),
        ({"first": -5}, "first=-5"),
        ({"factor": 0.5}, "factor=0.5"),
        ({"factor": float("nan")}, "factor=nan"),
        ({"factor": float("inf")}, "factor=inf"),
        ({"factor": True}, "factor=True"),
        ({"factor": "2"}, "factor='2'"),
        ({"first": "10m", "max_delay": "5m"}, "max_delay='5m'"),
        ({"max_total": "1m"}, "max_total='1m'"),
        ({"max_total": "forever"}, "max_total='forever'"),
    ],
)
def test_invalid_backoff_names_field_and_value(kwargs, text):
    with pytest.raises(PolicyError) as err:
        Backoff(**kwargs)
    assert "Backoff" in str(err.value) and text in str(err.value)


def test_backoff_zero_attempts_may_have_a_short_max_total():
    assert Backoff(attempts=0, max_total="1s").delays() == ()


# --------------------------------------------------------------------------- Retry


def test_retry_defaults_and_contention_forms():
    # A step that declares nothing is not retried (flytekit retries=0, KFP without set_retry).
    r = Retry()
    assert (r.any, r.transient, r.contention, r.preempted, r.oom_remediation) == (None, 0, None, 0, False)
    assert r.retries_nothing and r.max_retries == 0
    assert Retry(contention=3).contention == Backoff(attempts=3)
    assert Retry(contention=None).contention is None
    assert Retry(contention={"attempts": 5, "first": "1m"}).contention == Backoff(attempts=5, first="1m")
    assert Retry(transient=2, contention=4, preempted=10).max_retries == 2 + 4 + 10
    assert Retry(transient=2, preempted=10, oom_remediation=True).max_retries == 2 + 10 + MAX_OOM_HALVINGS
    assert Retry(3).max_retries == 3 and Retry(any=3) == Retry(3)


def test_a_step_that_declares_nothing_never_retries():
    for failure in (RESET, NO_GPU, SPOT, BUG):
        d = RetryTracker(Retry()).decide(failure)
        assert not d.retry, failure


def test_retry_n_retries_any_failure_at_once_like_flyte_and_kfp():
    # A literal port of flytekit's retries=3 / KFP's set_retry(3): the unknown bug is retried too.
    t = RetryTracker(Retry(3))
    decisions = [t.decide(f) for f in (BUG, RESET, NO_GPU, BUG)]
    assert [d.retry for d in decisions] == [True, True, True, False]
    assert all(d.delay_s == 0.0 for d in decisions)
    assert decisions[0].reason.startswith("FATAL 1/3: unclassified ValueError")
    assert decisions[3].reason.endswith("giving up after 3 retries of any failure")
    assert not RetryTracker(Retry(0)).decide(RESET).retry


def test_retry_n_cannot_be_mixed_with_the_taxonomy():
    with pytest.raises(PolicyError, match=r"Retry\(any=3\) retries every failure alike.*transient="):
        Retry(3, transient=1)
    with pytest.raises(PolicyError, match="contention="):
        Retry(any=2, contention=Backoff())
    with pytest.raises(PolicyError, match="any=101"):
        Retry(101)


def test_retry_n_keeps_oom_remediation_within_its_budget():
    t = RetryTracker(Retry(2, oom_remediation=True), batch_size=8)
    decisions = [t.decide(OOM) for _ in range(3)]
    assert [d.retry for d in decisions] == [True, True, False]
    assert decisions[0].remediation["batch_size"] == 4 and decisions[1].remediation["batch_size"] == 2


def test_retry_in_process_per_backend():
    from interlock.core.base.status import FailureKind as K

    kfp, flyte, local = frozenset({K.TRANSIENT, K.FATAL}), frozenset({K.CONTENTION}), frozenset(K)
    taxonomy = Retry(transient=2)
    assert taxonomy.retried_in_process(K.TRANSIENT, kfp) and not taxonomy.retried_in_process(K.TRANSIENT, flyte)
    # Retry(N) is the backend's own count: handed back wherever the backend retries at all.
    assert not Retry(3).retried_in_process(K.TRANSIENT, kfp)
    assert not Retry(3).retried_in_process(K.CONTENTION, flyte)
    assert Retry(3).retried_in_process(K.FATAL, local)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"transient": 11}, "transient=11"),
        ({"transient": -1}, "transient=-1"),
        ({"transient": "2"}, "transient='2'"),
        ({"transient": False}, "transient=False"),
        ({"preempted": -1}, "preempted=-1"),
        ({"preempted": 1000}, "preempted=1000"),
        ({"contention": True}, "contention=True"),
        ({"contention": "5m"}, "contention='5m'"),
        ({"contention": -2}, "attempts=-2"),
        ({"contention": {"attempts": 3, "jitter": 0.1}}, "jitter"),
        ({"oom_remediation": "yes"}, "oom_remediation='yes'"),
        ({"oom_remediation": 1}, "oom_remediation=1"),
    ],
)
def test_invalid_retry_names_field_and_value(kwargs, text):
    with pytest.raises(PolicyError) as err:
        Retry(**kwargs)
    assert text in str(err.value)


@pytest.mark.parametrize(
    "policy",
    [
        Retry(),
        Retry(transient=0, contention=None, preempted=0),
        Retry(transient=1, contention=Backoff(attempts=5, first="30s", factor=3, max_delay="2h", max_total=None)),
        Retry(contention=Backoff(first=90.0, max_delay=600)),
        Retry(oom_remediation=True),
        Retry(3),
        Retry(2, oom_remediation=True),
    ],
)
def test_retry_json_round_trip(policy):
    data = json.loads(json.dumps(policy.to_dict()))
    assert Retry.from_dict(data) == policy
    assert Retry.from_json(policy.to_json()) == policy


def test_retry_json_keeps_what_the_user_wrote_and_converts_timedelta():
    assert Retry(contention=2).to_dict()["contention"]["first"] == "5m"
    b = Backoff(first=timedelta(minutes=2), max_delay=timedelta(hours=1), max_total=None)
    assert b.to_dict()["first"] == 120.0
    assert Backoff.from_dict(json.loads(json.dumps(b.to_dict()))).delays() == b.delays()


def test_retry_from_dict_is_strict():
    with pytest.raises(PolicyError, match=r"no field\(s\) \['transiant'\]"):
        Retry.from_dict({"transiant": 2})
    with pytest.raises(PolicyError, match="must be a mapping"):
        Retry.from_dict([2])  # type: ignore[arg-type]
    assert Retry.from_dict({}) == Retry()


# --------------------------------------------------------------------------- decisions


def test_transient_retried_at_once_up_to_budget():
    t = RetryTracker(Retry(transient=2))
    d1, d2, d3 = (t.decide(NCCL) for _ in range(3))
    assert d1.reason == "TRANSIENT 1/2: NCCL watchdog timeout; retrying now"
    assert (d1.retry, d1.delay_s, d1.counts_against_budget, d1.attempt) == (True, 0.0, True, 1)
    assert (d2.retry, d2.attempt) == (True, 2)
    assert not d3.retry and d3.reason == "TRANSIENT: NCCL watchdog timeout; giving up after 2 retries"


def test_transient_zero_disables():
    d = RetryTracker(Retry(transient=0)).decide(RESET)
    assert not d.retry and "retries disabled" in d.reason


def test_contention_backoff_sequence_and_attempts_cap():
    t = RetryTracker(Retry(contention=Backoff(attempts=4, first="5m", max_total=None)))
    decisions = [t.decide(NO_GPU) for _ in range(5)]
    assert [d.delay_s for d in decisions[:4]] == [300, 600, 1200, 2400]
    assert [d.retry for d in decisions] == [True, True, True, True, False]
    assert decisions[0].reason == "CONTENTION 1/4: no GPU capacity available; retrying in 5m"
    assert decisions[3].reason.endswith("retrying in 40m")
    assert decisions[4].reason.endswith("giving up after 4 retries (waited 1h15m)")
    assert t.waited_s == 4500


def test_contention_stops_at_max_total():
    t = RetryTracker(Retry(contention=Backoff(attempts=10, first="10m", factor=2, max_delay="1h", max_total="1h")))
    decisions = [t.decide(NO_GPU) for _ in range(4)]
    assert [d.retry for d in decisions] == [True, True, False, False]  # 10m + 20m + 40m > 1h
    assert [d.delay_s for d in decisions[:2]] == [600, 1200]
    assert decisions[2].reason == (
        "CONTENTION: no GPU capacity available; giving up: the next wait of 40m would pass "
        "max_total 1h (waited 30m)"
    )
    assert t.waited_s == 1800


def test_contention_none_is_not_retried():
    d = RetryTracker(Retry(contention=None)).decide(NO_GPU)
    assert not d.retry and "contention retries disabled" in d.reason


def test_budgets_per_kind_are_independent():
    t = RetryTracker(Retry(transient=1, contention=Backoff(attempts=2, first="1s", max_total=None), preempted=2))
    seq = [NCCL, NO_GPU, NO_GPU, RESET, NO_GPU]
    assert [t.decide(f).retry for f in seq] == [True, True, True, False, False]
    # A later transient is still refused, contention is exhausted, preemption unaffected.
    assert t.decide(SPOT).retry


def test_preemption_does_not_consume_the_budget():
    t = RetryTracker(Retry(transient=1, preempted=3))
    assert all(t.decide(SPOT).retry for _ in range(3))
    d = t.decide(NCCL)
    assert d.retry and d.reason.startswith("TRANSIENT 1/1")
    last = t.decide(SPOT)
    assert not last.retry and "giving up after 3 preemption retries" in last.reason
    assert last.counts_against_budget is False


def test_preempted_decision_says_resume_and_not_counted():
    d = RetryTracker(Retry(preempted=10)).decide(SPOT)
    assert (d.retry, d.delay_s, d.counts_against_budget, d.kind) == (True, 0.0, False, FailureKind.PREEMPTED)
    assert d.reason.startswith("PREEMPTED 1/10: preempted (SIGTERM")
    assert "latest checkpoint" in d.reason and "not counted against the retry budget" in d.reason


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (XID, "FATAL: GPU Xid error (hardware or driver fault); not retried"),
        (BUG, "FATAL: unclassified ValueError: shapes (32,10) and (12,) not aligned; not retried"),
        (BAD_DATA, "FATAL: data validation failed; not retried"),
        (OOM, "FATAL: CUDA out of memory; not retried"),
    ],
)
def test_fatal_stops_with_its_reason(failure, reason):
    t = RetryTracker(Retry(transient=10, contention=10, preempted=10))
    d = t.decide(failure)
    assert (d.retry, d.reason, d.remediation) == (False, reason, None)


def test_oom_remediation_halves_until_batch_size_one():
    t = RetryTracker(Retry(oom_remediation=True), batch_size=8)
    decisions = [t.decide(OOM) for _ in range(4)]
    assert [d.retry for d in decisions] == [True, True, True, False]
    assert [d.remediation["batch_size"] for d in decisions[:3]] == [4, 2, 1]
    first = decisions[0]
    assert first.remediation == {
        "batch_size_factor": 0.5,
        "grad_accum_factor": 2,
        "halvings": 1,
        "total_batch_size_factor": 0.5,
        "total_grad_accum_factor": 2,
        "batch_size": 4,
    }
    # The effective batch (batch x accumulation) stays 8 at every step.
    assert all(8 * d.remediation["total_batch_size_factor"] * d.remediation["total_grad_accum_factor"] == 8
               for d in decisions[:3])
    assert "batch size 8 -> 4" in first.reason and first.counts_against_budget is False
    assert decisions[3].reason == "FATAL: CUDA out of memory; OOM remediation exhausted: the batch size is already 1"


def test_oom_remediation_with_unknown_batch_size_is_bounded():
    t = RetryTracker(Retry(oom_remediation=True))
    decisions = [t.decide(OOM) for _ in range(MAX_OOM_HALVINGS + 1)]
    assert [d.retry for d in decisions].count(True) == MAX_OOM_HALVINGS
    assert decisions[-2].remediation["total_batch_size_factor"] == 0.5**MAX_OOM_HALVINGS
    assert "exhausted after" in decisions[-1].reason


def test_oom_remediation_does_not_touch_other_fatal_failures_or_budgets():
    t = RetryTracker(Retry(transient=1, oom_remediation=True), batch_size=64)
    assert not t.decide(XID).retry
    assert t.decide(OOM).retry
    assert t.decide(NCCL).reason.startswith("TRANSIENT 1/1")


def test_pure_decide_over_history_matches_the_tracker():
    policy = Retry(transient=2, contention=Backoff(attempts=3, first="1m"), oom_remediation=True)
    seq = [NCCL, NO_GPU, SPOT, OOM, NO_GPU, RESET, NO_GPU, NCCL, OOM, NO_GPU]
    tracker = RetryTracker(policy, batch_size=16)
    for i, failure in enumerate(seq):
        live = tracker.decide(failure)
        history = [Failure.from_dict(json.loads(json.dumps(f.to_dict()))) for f in seq[:i]]
        assert decide(policy, failure, history, batch_size=16) == live


def test_decision_is_json_able():
    d = RetryTracker(Retry(oom_remediation=True), batch_size=4).decide(OOM)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["kind"] == "FATAL" and data["remediation"]["batch_size"] == 2
    assert isinstance(d, Decision)


def test_tracker_rejects_bad_inputs():
    with pytest.raises(PolicyError, match="batch_size=0"):
        RetryTracker(Retry(), batch_size=0)
    with pytest.raises(PolicyError, match="needs a Retry"):
        RetryTracker({"transient": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a Failure"):
        RetryTracker(Retry()).decide(ValueError("x"))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- properties

durations = st.floats(min_value=0.001, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    first=durations,
    factor=st.floats(min_value=1.0, max_value=10.0),
    cap_ratio=st.floats(min_value=1.0, max_value=1e4),
    n_max=st.integers(min_value=1, max_value=200),
)
def test_delay_is_monotone_capped_and_follows_the_formula(first, factor, cap_ratio, n_max):
    cap = first * cap_ratio
    b = Backoff(attempts=10, first=first, factor=factor, max_delay=cap, max_total=None)
    delays = [b.delay(n) for n in range(1, n_max + 1)]
    assert delays[0] == pytest.approx(first)
    assert all(a <= b_ for a, b_ in zip(delays, delays[1:], strict=False))
    assert all(0 < d <= cap for d in delays)
    for n, d in enumerate(delays, start=1):
        raw = first * factor ** (n - 1) if (n - 1) * math.log(factor) < 700 else math.inf
        assert d == pytest.approx(min(raw, cap), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    attempts=st.integers(min_value=0, max_value=30),
    first=durations,
    factor=st.floats(min_value=1.0, max_value=4.0),
    total_ratio=st.floats(min_value=1.0, max_value=100.0),
)
def test_tracker_never_waits_past_max_total_or_attempts(attempts, first, factor, total_ratio):
    b = Backoff(attempts=attempts, first=first, factor=factor, max_delay=first * 50, max_total=first * total_ratio)
    t = RetryTracker(Retry(contention=b))
    granted = [d for d in (t.decide(NO_GPU) for _ in range(attempts + 2)) if d.retry]
    assert len(granted) <= attempts
    assert sum(d.delay_s for d in granted) <= b.max_total_s + 1e-9
    assert tuple(d.delay_s for d in granted) == b.delays()
