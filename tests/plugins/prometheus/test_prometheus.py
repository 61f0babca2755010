"""Step and run metrics, pushed by real runs on every backend to a real Pushgateway and read
back from a real Prometheus server; the textfile form checked by Prometheus's own promtool."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from backends import runnable_backends
from metrics_demo import metered
from prometheus_client.parser import text_string_to_metric_families

import interlock as il
from interlock.core.base.errors import MetricsUnavailable
from interlock.core.run.exporters import PUSHGATEWAY_ENV, TEXTFILE_ENV


def _receipt(result: il.RunResult) -> dict[str, Any]:
    return dict(json.loads(Path(str(result.receipt_path)).read_text()))


def _step(receipt: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in receipt["steps"] if s["step"] == name)


def _value(series: list[dict[str, Any]]) -> float:
    assert len(series) == 1, series
    return float(series[0]["value"][1])


@pytest.mark.parametrize("backend", runnable_backends())
def test_a_runs_step_and_run_metrics_reach_prometheus(prometheus, backend: str, tmp_path: Path) -> None:
    result = il.run(metered, backend, workdir=tmp_path, progress=False, pushgateway=prometheus.gateway)
    receipt = _receipt(result)
    train, evaluate = _step(receipt, "train"), _step(receipt, "evaluate")
    run = f'run_id="{result.run_id}"'

    durations = prometheus.wait_for(f"interlock_step_duration_seconds{{{run}}}", count=2)
    by_step = {s["metric"]["step"]: float(s["value"][1]) for s in durations}
    assert by_step == pytest.approx({"train": train["duration_s"], "evaluate": evaluate["duration_s"]}, abs=1e-3)
    labels = next(s["metric"] for s in durations if s["metric"]["step"] == "train")
    assert labels | {"pipeline": "metered", "backend": backend, "status": "succeeded", "team": "fraud",
                     "cost_center": "ml-42", "queue": "team-a", "node": "train"} == labels

    # Three fetches of 0.1 s each: data wait, not compute; one checkpoint save.
    wait = _value(prometheus.wait_for(f'interlock_step_data_wait_seconds{{{run},step="train"}}'))
    assert wait == pytest.approx(train["usage"]["data_wait_s"], abs=1e-3) and wait >= 0.3
    ckpt = _value(prometheus.wait_for(f'interlock_step_checkpoint_seconds{{{run},step="train"}}'))
    assert ckpt == pytest.approx(train["usage"]["checkpoint_s"], abs=1e-3) and ckpt > 0
    assert _value(prometheus.wait_for(f'interlock_step_checkpoints_total{{{run},step="train"}}')) == 1

    attempts = prometheus.wait_for(f'interlock_step_attempts_total{{{run},step="evaluate"}}', count=2)
    assert {s["metric"]["kind"]: float(s["value"][1]) for s in attempts} == {"transient": 1.0, "none": 1.0}

    ratio = _value(prometheus.wait_for(f"interlock_run_gpu_efficiency_ratio{{{run}}}"))
    eff = receipt["totals"]["gpu_efficiency"]
    assert ratio == pytest.approx(eff["ratio"], abs=1e-4)
    # Busy time is estimated here (no NVML): billed time less the data wait and the checkpoint.
    assert eff["source"] == "estimated" and ratio < 1.0
    assert eff["rest"]["data_wait"] == pytest.approx(wait / train["gpu_seconds"], abs=0.01)
    cost = prometheus.wait_for(f"interlock_run_estimated_cost_usd{{{run}}}")
    assert _value(cost) == pytest.approx(receipt["totals"]["estimated_cost_usd"], abs=1e-6)
    assert cost[0]["metric"]["team"] == "fraud"  # every step's label: the run's too
    shares = prometheus.wait_for(f"interlock_run_gpu_time_ratio{{{run}}}", count=4)
    assert sum(float(s["value"][1]) for s in shares) == pytest.approx(1.0, abs=0.01)


def test_textfile_metrics_pass_promtool_and_carry_no_run_id(tmp_path: Path, monkeypatch) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus package) is not installed")
    out = tmp_path / "textfile"
    out.mkdir()
    monkeypatch.setenv(TEXTFILE_ENV, str(out))
    result = il.run(metered, "local", workdir=tmp_path / "w", progress=False)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["interlock_metered.prom", "interlock_metered_evaluate.prom", "interlock_metered_train.prom"]
    for name in files:
        text = (out / name).read_text()
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, (name, check.stdout, check.stderr)
        assert result.run_id not in text  # a textfile's series live long: no run id on them
        labels = {k for fam in text_string_to_metric_families(text) for s in fam.samples for k in s.labels}
        assert "run_id" not in labels and "pipeline" in labels
    train = (out / "interlock_metered_train.prom").read_text()
    assert 'interlock_step_data_wait_seconds{backend="local",cost_center="ml-42",node="train"' in train


def test_metrics_are_off_by_default_and_load_nothing(tmp_path: Path) -> None:
    code = (
        "import sys, interlock as il\n"
        "from metrics_demo import metered\n"
        f"il.run(metered, 'local', workdir={str(tmp_path)!r}, progress=False)\n"
        "print(sorted(m for m in sys.modules if 'prometheus' in m))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (PUSHGATEWAY_ENV, TEXTFILE_ENV)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_malformed_gateway_fails_the_run_before_any_step(tmp_path: Path) -> None:
    with pytest.raises(MetricsUnavailable, match="INTERLOCK_PUSHGATEWAY='not a gateway!' is not host:port") as err:
        il.run(metered, "local", workdir=tmp_path, progress=False, pushgateway="not a gateway!")
    assert err.value.code == "METRICS_UNAVAILABLE" and "pushgateway.monitoring:9091" in str(err.value.hint)
    assert not list(tmp_path.glob("runs/*/state/fragments/*"))
    assert PUSHGATEWAY_ENV not in os.environ  # the setting is the run's, not the process's


def test_an_unreachable_gateway_never_fails_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with caplog.at_level(logging.WARNING, logger="interlock.metrics"):
        result = il.run(metered, "local", workdir=tmp_path, progress=False, pushgateway=f"127.0.0.1:{port}")
    assert result.succeeded and result.outputs["o0"] == 0.9
    warned = [r.getMessage() for r in caplog.records if r.name == "interlock.metrics"]
    assert len(warned) == 1 and f"127.0.0.1:{port}" in warned[0]  # once a run, not once per step
