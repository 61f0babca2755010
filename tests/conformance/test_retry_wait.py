"""Retry(N, wait=il.Backoff(...)) on every backend: N retries of any failure with the waits
between them (KFP: set_retry's backoff; Flyte 1: the shim waits in the pod); ``wait`` without
N is refused with the form to write (issue 31 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import backend_params

import interlock as il
from conformance import retry_pipelines as rp
from interlock.core.base.errors import PolicyError
from interlock.core.failure.decisions import decide
from interlock.core.failure.rules import default_classifier


@pytest.mark.parametrize("backend", backend_params("retry.any_backoff"))
def test_retries_of_any_failure_wait_with_backoff(backend: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(rp.ATTEMPTS, str(tmp_path / "attempts.txt"))
    r = il.run(rp.retry_wait, backend, workdir=tmp_path, progress=False)
    assert r.succeeded and r.outputs == {"o0": 42}
    attempts = next(s for s in json.loads(Path(r.receipt_path).read_text())["steps"] if s["node"] == "flaky")["attempts"]
    assert [a["status"] for a in attempts] == ["failed", "failed", "succeeded"]
    gaps = [b["started"] - a["ended"] for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, gaps  # 1 s, then 1 s x 2


def test_the_decisions_say_how_long_each_wait_is() -> None:
    policy = il.Retry(3, wait=il.Backoff(first="10s", factor=3, max_delay="1m", max_total="2m"))
    f = default_classifier.classify(ValueError("bad config"))  # FATAL: Retry(N) retries any failure
    first, second, third = (decide(policy, f, [f] * n) for n in range(3))
    assert (first.delay_s, second.delay_s, third.delay_s) == (10.0, 30.0, 60.0)
    assert "retrying in 10s (Retry(3): any failure)" in first.reason
    assert not decide(policy, f, [f] * 3).retry  # the count is N's
    tight = il.Retry(3, wait=il.Backoff(first="10s", factor=3, max_delay="1m", max_total="30s"))
    assert not decide(tight, f, [f]).retry and "would pass max_total" in decide(tight, f, [f]).reason


def test_kfp_renders_the_wait_as_set_retry_backoff() -> None:
    pytest.importorskip("kfp")
    from interlock.adapters.kfp.policies import retry_mapping

    m = retry_mapping(il.Retry(2, wait=rp.WAIT))
    assert m is not None and (m.num_retries, m.backoff_duration, m.backoff_factor, m.backoff_max_duration) == (
        2, "1s", 2.0, "5s")


def test_flyte_leaves_the_waits_to_the_shim_in_the_pod() -> None:
    pytest.importorskip("flytekit")
    from dataclasses import replace

    from interlock.adapters.flyte.policies import retries
    from interlock.adapters.flyte.tasks import CLUSTER_IN_PROCESS

    step = rp.retry_wait.spec.step_of("flaky")
    assert retries(step, CLUSTER_IN_PROCESS) == 0  # Flyte 1 would retry at once: the shim waits in the pod
    assert retries(replace(step, retry=il.Retry(2)), CLUSTER_IN_PROCESS) == 2  # no wait: Flyte's own retries


def test_a_wait_without_a_count_is_refused_with_the_form_to_write() -> None:
    with pytest.raises(PolicyError, match=r"Retry\(wait=.*\) shapes the waits between the retries of Retry\(N\)") as e:
        il.Retry(transient=2, wait=il.Backoff(first="1s"))
    assert "Retry(3, wait=il.Backoff(first='30s'))" in str(e.value.hint)
    assert il.Retry(4, wait=il.Backoff(first="1s", attempts=9)).wait.attempts == 4  # N is the count
    assert il.Retry.from_dict(il.Retry(2, wait=rp.WAIT).to_dict()) == il.Retry(2, wait=rp.WAIT)


def test_flyte2_renders_the_wait_as_its_retry_strategy_backoff() -> None:
    pytest.importorskip("flyte")
    from interlock.adapters.flyte2.policies import retries

    step = rp.retry_wait.spec.step_of("flaky")
    assert retries(step, frozenset()) == (
        "flyte.RetryStrategy(2, backoff=flyte.Backoff(base=timedelta(seconds=1.0), factor=2.0, "
        "cap=timedelta(seconds=5.0)))")


def test_argo_renders_the_wait_as_its_retry_strategy_backoff() -> None:
    pytest.importorskip("hera")
    from interlock.adapters.argo.policies import retry_strategy

    assert retry_strategy(rp.retry_wait.spec.step_of("flaky")) == {
        "limit": 2, "retryPolicy": "Always",
        "backoff": {"duration": "1s", "factor": 2, "cap": "5s", "maxDuration": "21600s"},
    }


def test_airflow_renders_the_wait_as_its_retry_delay_and_exponential_backoff() -> None:
    pytest.importorskip("airflow")
    from datetime import timedelta

    from interlock.adapters.airflow.retries import retry_settings

    kw = retry_settings(rp.retry_wait.spec.step_of("flaky"), policy=False)
    assert kw == {"retries": 2, "retry_delay": timedelta(seconds=1), "max_retry_delay": timedelta(seconds=5),
                  "retry_exponential_backoff": 2.0}
