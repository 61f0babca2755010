"""KFP: the time triggers as recurring runs. Compile writes their definitions beside the IR (the
IR cannot hold a schedule); ``KfpBackend.apply_triggers`` creates them through ``kfp.Client``
against a loopback server speaking KFP's v2beta1 REST API, which keeps what it was sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp_api import serve

import interlock as il
from interlock.adapters.kfp.backend import KfpBackend
from interlock.adapters.kfp.policies import KfpOptions
from interlock.adapters.kfp.recurring import SCHEDULED_TIME, RecurringRunError
from interlock.core.base.errors import CapabilityError, PipelineDefinitionError


@il.step
def echo(snapshot: str, mode: str, extra: dict | None) -> str:
    return snapshot + mode


def _pipeline(*triggers: object, name: str = "kfp-trig") -> il.PipelineSpec:
    @il.pipeline(name=name, triggers=list(triggers))
    def kfp_trig(snapshot: str = "s0", mode: str = "refresh", as_of: str = "", extra: dict | None = None) -> str:
        return echo(snapshot=snapshot, mode=mode, extra=extra)

    return il.spec(kfp_trig)


TWO = (il.Cron("0 3 * * 1", inputs={"mode": "tune", "extra": {"k": 1}}, time_input="as_of", max_concurrent=2),
       il.Every("6h", name="six", start="2026-01-01T00:00:00+00:00", catch_up=True, active=False))


def _compile(spec: il.PipelineSpec, out: Path) -> dict[str, Path]:
    return {p.name: p for p in il.compile(spec, backend="kfp", out=out, image="registry.example/team:1")}


def test_compile_writes_one_recurring_run_per_time_trigger_beside_the_ir(tmp_path: Path) -> None:
    files = _compile(_pipeline(*TWO), tmp_path)
    assert sorted(files) == ["kfp-trig.recurring.json", "kfp-trig.yaml"]
    doc = json.loads(files["kfp-trig.recurring.json"].read_text())
    assert doc["ir"] == "kfp-trig.yaml"
    weekly, six = doc["recurring_runs"]
    assert weekly == {"name": "kfp-trig-cron-0", "trigger": "cron-0", "cron_expression": "0 0 3 * * 1",
                      "max_concurrency": 2, "no_catchup": True, "enabled": True,
                      "params": {"mode": "tune", "extra": '{"k": 1}', "as_of": SCHEDULED_TIME}}
    assert six == {"name": "kfp-trig-six", "trigger": "six", "interval_second": 21600,
                   "start_time": "2026-01-01T00:00:00+00:00", "max_concurrency": 1, "no_catchup": False,
                   "enabled": False, "params": {}}


def test_a_compile_without_time_triggers_writes_no_definitions(tmp_path: Path) -> None:
    _compile(_pipeline(*TWO), tmp_path)
    assert sorted(_compile(_pipeline(), tmp_path)) == ["kfp-trig.yaml"]
    assert not (tmp_path / "kfp-trig.recurring.json").exists()  # the older compile's schedules are gone


def _sent(api: Any) -> dict[str, dict[str, Any]]:
    return {r["display_name"]: r for r in api.recurring.values()}


def test_apply_creates_the_recurring_runs_through_the_kfp_api(tmp_path: Path) -> None:
    spec = _pipeline(*TWO)
    _compile(spec, tmp_path)
    with serve() as api:
        lines = KfpBackend().apply_triggers(spec, tmp_path, KfpOptions(host=api.host, experiment="fraud"))
        assert [line.split(":")[0] for line in lines] == [
            "created recurring run 'kfp-trig-cron-0' (0 0 3 * * 1) in experiment 'fraud'",
            "created recurring run 'kfp-trig-six' (every 21600s, disabled) in experiment 'fraud'"]
        assert ("GET", "/apis/v2beta1/healthz") in api.requests
        [exp] = api.experiments.values()
        assert exp["display_name"] == "fraud"
        sent = _sent(api)
        weekly, six = sent["kfp-trig-cron-0"], sent["kfp-trig-six"]
        assert weekly["experiment_id"] == exp["experiment_id"]
        assert weekly["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * 1"}}
        assert (weekly["max_concurrency"], weekly["no_catchup"], weekly["mode"]) == (2, True, "ENABLE")
        assert weekly["runtime_config"]["parameters"] == {"mode": "tune", "extra": '{"k": 1}', "as_of": SCHEDULED_TIME}
        pipeline, platform = yaml.safe_load_all((tmp_path / "kfp-trig.yaml").read_text())
        embedded = weekly["pipeline_spec"]  # the IR itself, its kfp-kubernetes platform spec too
        assert embedded["pipeline_spec"]["pipelineInfo"] == pipeline["pipelineInfo"]
        assert embedded["platform_spec"]["platforms"].keys() == platform["platforms"].keys()
        assert six["trigger"] == {"periodic_schedule": {"interval_second": 21600,
                                                        "start_time": "2026-01-01T00:00:00+00:00"}}
        assert (six["no_catchup"], six["mode"]) == (False, "DISABLE")


def test_applying_again_replaces_each_recurring_run_of_the_same_name(tmp_path: Path) -> None:
    spec = _pipeline(*TWO)
    _compile(spec, tmp_path)
    with serve() as api:
        opts = KfpOptions(host=api.host)
        KfpBackend().apply_triggers(spec, tmp_path, opts)
        first = {r["recurring_run_id"] for r in api.recurring.values()}
        lines = KfpBackend().apply_triggers(spec, tmp_path, opts)
        assert all(line.startswith("replaced recurring run") for line in lines)
        assert len(api.recurring) == 2 and not first & set(api.recurring)  # deleted, then created anew
        assert sum(1 for m, p in api.requests if m == "DELETE") == 2
        assert len(api.experiments) == 1  # "Default", found the second time


def test_apply_says_what_is_missing_and_wraps_the_apis_refusal(tmp_path: Path) -> None:
    spec = _pipeline(*TWO)
    with pytest.raises(PipelineDefinitionError, match="no recurring-run definitions") as err:
        KfpBackend().apply_triggers(spec, tmp_path, KfpOptions(host="http://127.0.0.1:9"))
    assert "interlock compile" in (err.value.hint or "")
    _compile(spec, tmp_path)
    with pytest.raises(PipelineDefinitionError, match="needs the KFP API's address"):
        KfpBackend().apply_triggers(spec, tmp_path, KfpOptions())
    with serve() as api:
        host = api.host
    with pytest.raises(RecurringRunError, match=f"the KFP API at {host} refused") as refused:
        KfpBackend().apply_triggers(spec, tmp_path, KfpOptions(host=host))
    assert refused.value.retryable and "healthz" in (refused.value.hint or "")


def test_a_cron_in_another_zone_is_refused_naming_the_trigger(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match="reads its cron in UTC") as err:
        _compile(_pipeline(il.Cron("0 3 * * *", tz="Europe/Berlin", name="berlin")), tmp_path)
    assert err.value.step == "berlin" and "tz='UTC'" in (err.value.hint or "")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("trigger", "feature"), [
    (il.OnData("s3://b/snap/", uri_input="snapshot"), "trigger.data"),
    (il.OnDrift("s3://b/snap/", model="fraud"), "trigger.drift"),
])
def test_data_and_drift_triggers_are_refused_by_the_capability_check(tmp_path: Path, trigger: object,
                                                                      feature: str) -> None:
    with pytest.raises(CapabilityError, match=rf"cannot express '{feature}'.*interlock watch FILE --backend kfp-local"):
        _compile(_pipeline(trigger), tmp_path)


PIPELINE_FILE = '''
import interlock as il


@il.step
def echo(snapshot: str) -> str:
    return snapshot


@il.pipeline(name="kfp-cli-trig", triggers=[il.Cron("30 2 * * *", inputs={"snapshot": "nightly"})])
def kfp_cli_trig(snapshot: str = "s0") -> str:
    return echo(snapshot=snapshot)
'''


def test_interlock_triggers_apply_compiles_and_creates_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from interlock.core.cli.main import main

    source = tmp_path / "kfp_cli_trig.py"
    source.write_text(PIPELINE_FILE)
    with serve() as api:
        rc = main(["triggers", "apply", str(source), "--backend", "kfp", "--out", str(tmp_path / "build"),
                   "--option", f"host={api.host}", "--option", "image=registry.example/team:1"])
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "created recurring run 'kfp-cli-trig-cron-0' (0 30 2 * * *)" in out
        (sent,) = api.recurring.values()
        assert sent["trigger"] == {"cron_schedule": {"cron": "0 30 2 * * *"}}
        assert sent["runtime_config"]["parameters"] == {"snapshot": "nightly"}
        # Applied again from the compiled folder: replaced, not doubled.
        assert main(["triggers", "apply", str(source), "--backend", "kfp", "--compiled", str(tmp_path / "build"),
                     "--option", f"host={api.host}"]) == 0
        assert "replaced recurring run 'kfp-cli-trig-cron-0'" in capsys.readouterr().out
        assert len(api.recurring) == 1
    assert (tmp_path / "build" / "kfp-cli-trig.recurring.json").is_file()
