"""The bridge's pure parts, in the pytest process (no Airflow import here: its config is global).

Names and labels are property-tested against rules written out independently in
``bridge_fake_admin``; provider metadata is validated with Airflow's own JSON schema.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from bridge_fake_admin import k8s_key_ok, k8s_value_ok
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.core.base.errors import InterlockError, PipelineDefinitionError, SerializationError
from interlock.plugins.airflow import names
from interlock.plugins.airflow.connection import config_from_connection, connection_extra
from interlock.plugins.airflow.phases import ACTIVE, FAILED_OR_ENDING, TERMINAL, Phase
from interlock.plugins.airflow.provider import get_provider_info

FLYTE_NAME_RULE = r"^[a-z][a-z0-9-]{0,19}$"


def test_provider_discovery_imports_neither_airflow_nor_flytekit():
    """Airflow imports ``.provider`` while discovering providers: it must stay light."""
    import subprocess

    code = (
        "import sys, interlock.plugins.airflow.provider, interlock.plugins.airflow.names; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'flytekit'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- execution names ----------------------------------------------------------------------

KEYS = st.builds(
    names.logical_run_key,
    dag_id=st.text(min_size=1, max_size=250),
    task_id=st.text(min_size=1, max_size=250),
    run_id=st.text(min_size=1, max_size=250),
    map_index=st.integers(-1, 10_000),
    project=st.just("ml"),
    domain=st.sampled_from(["development", "production"]),
    launch_plan=st.text(min_size=1, max_size=100),
    namespace=st.sampled_from(["", "staging", "prod"]),
)


@settings(max_examples=300, deadline=None, database=None)
@given(key=KEYS, generation=st.integers(0, names.MAX_GENERATIONS))
def test_execution_names_are_valid_flyte_names_and_deterministic(key, generation):
    import re

    name = names.execution_name(key, generation)
    assert re.fullmatch(FLYTE_NAME_RULE, name) and len(name) <= 20
    assert names.is_valid_execution_name(name)
    assert names.execution_name(key, generation) == name
    assert name.endswith(f"-{generation}")


@settings(max_examples=100, deadline=None, database=None)
@given(key=KEYS, other=KEYS)
def test_different_runs_and_generations_get_different_names(key, other):
    assert names.execution_name(key, 0) != names.execution_name(key, 1)
    if key != other:
        assert names.execution_name(key, 0) != names.execution_name(other, 0)


def test_the_try_number_is_not_part_of_the_run_key():
    key = names.logical_run_key(
        dag_id="d", task_id="t", run_id="r", map_index=-1, project="p", domain="x", launch_plan="lp"
    )
    assert "try" not in key and names.execution_name(key, 0) == names.execution_name(key, 0)
    with pytest.raises(ValueError):
        names.execution_name(key, names.MAX_GENERATIONS + 1)


def _run_key(**changes) -> str:
    fields = dict(
        dag_id="fraud", task_id="run_on_flyte", run_id="scheduled__2026-11-01T00:00:00+00:00",
        map_index=-1, project="ml", domain="production", launch_plan="fraud-retrain",
    )
    return names.logical_run_key(**{**fields, **changes})


def test_the_name_covers_namespace_version_and_inputs():
    """A task re-attaches only to what it would launch: each part of the identity counts."""
    digest = names.inputs_digest(b"snapshot=2026-11-01")
    base = names.execution_name(names.launch_key(_run_key(), version="v1", inputs_sha256=digest), 0)
    variants = {
        "namespace": names.launch_key(_run_key(namespace="staging"), version="v1", inputs_sha256=digest),
        "other namespace": names.launch_key(_run_key(namespace="prod"), version="v1", inputs_sha256=digest),
        "version": names.launch_key(_run_key(), version="v2", inputs_sha256=digest),
        "inputs": names.launch_key(
            _run_key(), version="v1", inputs_sha256=names.inputs_digest(b"snapshot=2026-11-02")
        ),
    }
    got = {what: names.execution_name(key, 0) for what, key in variants.items()}
    assert base not in got.values() and len(set(got.values())) == len(got), got
    # Deterministic: the same launch gets the same name in any process, on any retry.
    again = names.launch_key(_run_key(), version="v1", inputs_sha256=names.inputs_digest(b"snapshot=2026-11-01"))
    assert names.execution_name(again, 0) == base
    assert re.fullmatch(FLYTE_NAME_RULE, base) and len(base) == 18  # "af" + 14 hex + "-0"
    with pytest.raises(ValueError, match="resolved launch plan version"):
        names.launch_key(_run_key(), version="", inputs_sha256=digest)


@settings(max_examples=100, deadline=None, database=None)
@given(
    key=KEYS,
    version=st.text(min_size=1, max_size=64),
    data=st.binary(max_size=200),
    generation=st.integers(0, names.MAX_GENERATIONS),
)
def test_launch_keys_make_valid_flyte_names(key, version, data, generation):
    name = names.execution_name(
        names.launch_key(key, version=version, inputs_sha256=names.inputs_digest(data)), generation
    )
    assert re.fullmatch(FLYTE_NAME_RULE, name) and names.is_valid_execution_name(name)


def test_launch_plan_name_from_an_interlock_pipeline_or_a_string():
    import interlock as il

    @il.step
    def ingest(snapshot: str) -> str:
        return snapshot

    @il.pipeline(name="fraud-retrain")
    def fraud_retrain(snapshot: str = "2026-11-01"):
        ingest(snapshot=snapshot)

    assert names.launch_plan_name(fraud_retrain) == "fraud-retrain"  # the Flyte adapter's naming
    assert names.launch_plan_name("fraud-retrain") == "fraud-retrain"
    with pytest.raises(TypeError):
        names.launch_plan_name(42)
    with pytest.raises(ValueError):
        names.launch_plan_name("")


# -- labels and annotations ---------------------------------------------------------------


@settings(max_examples=400, deadline=None, database=None)
@given(value=st.text(max_size=300))
def test_any_value_becomes_a_valid_label_value_and_valid_ones_stay(value):
    out = names.label_value(value)
    assert k8s_value_ok(out) and len(out) <= 63
    assert names.label_value(out) == out  # idempotent
    if k8s_value_ok(value):
        assert out == value


@settings(max_examples=200, deadline=None, database=None)
@given(a=st.text(min_size=1, max_size=120), b=st.text(min_size=1, max_size=120))
def test_changed_label_values_keep_distinct_originals_apart(a, b):
    if a != b and not (k8s_value_ok(a) and k8s_value_ok(b)):
        assert names.label_value(a) != names.label_value(b) or (k8s_value_ok(a) != k8s_value_ok(b))


@settings(max_examples=300, deadline=None, database=None)
@given(key=st.text(min_size=1, max_size=300))
def test_any_key_becomes_a_valid_label_key(key):
    out = names.label_key(key)
    assert k8s_key_ok(out), out
    if k8s_key_ok(key):
        assert out == key


def test_run_ids_and_cost_tags_become_labels():
    labels = names.sanitize_labels(
        {
            "airflow-run-id": "scheduled__2026-11-01T03:00:00+00:00",
            "cost-center": "ml/42",
            "team": "fraud",
            "Team Name": "Fraud Detection",
        }
    )
    assert labels["team"] == "fraud"
    assert labels["airflow-run-id"].startswith("scheduled__2026-11-01T03-00-00-00-00-")
    assert labels["cost-center"].startswith("ml-42-")
    (team_key,) = [k for k in labels if k.startswith("Team-Name-")]
    assert labels[team_key].startswith("Fraud-Detection-")
    assert len(names.sanitize_labels({"a b": "1", "a_b": "2", "a-b": "3", "a*b": "4"})) == 4


def test_annotations_keep_values_whole():
    out = names.sanitize_annotations(
        {"airflow/run-id": "manual__2026-11-29T08:00:00+00:00", "note": "a b <c>"}
    )
    assert out == {"airflow/run-id": "manual__2026-11-29T08:00:00+00:00", "note": "a b <c>"}


# -- phases -------------------------------------------------------------------------------


def test_every_phase_is_acted_on_exactly_once():
    assert ACTIVE | FAILED_OR_ENDING | {Phase.SUCCEEDED} == set(Phase)
    assert not ACTIVE & FAILED_OR_ENDING
    assert TERMINAL == {Phase.SUCCEEDED, Phase.FAILED, Phase.ABORTED, Phase.TIMED_OUT}


# -- connection -> flytekit Config ----------------------------------------------------------


def _conn(**kw):
    extra = kw.pop("extra", {})
    base = {
        "conn_id": "flyte_default",
        "host": "flyte.example.com",
        "port": 443,
        "login": None,
        "password": None,
    }
    return SimpleNamespace(**{**base, **kw}, extra_dejson=extra)


def test_client_credentials_connection():
    from flytekit.configuration import AuthType

    cfg = config_from_connection(
        _conn(
            host="dns:///flyte.example.com",
            port=None,
            login="airflow",
            password="s3cret",
            extra={"scopes": "all, offline", "audience": "flyte", "project": "ml"},
        )
    )
    platform = cfg.platform
    assert platform.endpoint == "dns:///flyte.example.com"
    assert (platform.client_id, platform.client_credentials_secret) == ("airflow", "s3cret")
    assert platform.auth_mode == AuthType.CLIENTSECRET
    assert platform.scopes == ["all", "offline"] and platform.audience == "flyte"
    assert platform.insecure is False


def test_insecure_endpoint_with_port_and_ui_prefixed_extras():
    conn = _conn(
        host="grpc://127.0.0.1",
        port=30080,
        extra={"extra__flyte__insecure": "true", "extra__flyte__domain": "production"},
    )
    assert connection_extra(conn) == {"insecure": "true", "domain": "production"}
    platform = config_from_connection(conn).platform
    assert platform.endpoint == "127.0.0.1:30080" and platform.insecure is True
    assert platform.client_id is None
    renamed = _conn(host="grpc://h", extra={"extra__interlock_flyte__domain": "staging",
                                            "extra__flyte__domain": "production", "extra__flyte__project": "ml"})
    assert connection_extra(renamed) == {"domain": "staging", "project": "ml"}  # the current type's form wins


def test_connection_errors_name_the_fix():
    with pytest.raises(InterlockError, match="no host"):
        config_from_connection(_conn(host=""))
    with pytest.raises(InterlockError, match="no client secret"):
        config_from_connection(_conn(login="airflow"))


# -- literals -------------------------------------------------------------------------------


def test_templated_strings_are_typed_by_the_launch_plan():
    from flytekit.core.context_manager import FlyteContextManager
    from flytekit.models import types as tm

    from interlock.plugins.airflow.literals import literal_map_to_python, to_literal_map

    expected = {
        "epochs": tm.LiteralType(simple=tm.SimpleType.INTEGER),
        "lr": tm.LiteralType(simple=tm.SimpleType.FLOAT),
        "full": tm.LiteralType(simple=tm.SimpleType.BOOLEAN),
        "snapshot": tm.LiteralType(simple=tm.SimpleType.STRING),
        "ids": tm.LiteralType(collection_type=tm.LiteralType(simple=tm.SimpleType.INTEGER)),
    }
    ctx = FlyteContextManager.current_context()
    values = {"epochs": "3", "lr": "0.5", "full": "False", "snapshot": "2026-11-01", "ids": [1, 2]}
    lm = to_literal_map(ctx, values, expected, entity="train")
    assert literal_map_to_python(lm) == {
        "epochs": 3,
        "lr": 0.5,
        "full": False,
        "snapshot": "2026-11-01",
        "ids": [1, 2],
    }
    with pytest.raises(PipelineDefinitionError, match="has no input 'epoch'"):
        to_literal_map(ctx, {"epoch": 3}, expected, entity="train")
    with pytest.raises(SerializationError, match="input 'epochs'"):
        to_literal_map(ctx, {"epochs": "three"}, expected, entity="train")


# -- provider metadata ----------------------------------------------------------------------


def _airflow_file(name: str) -> Path:
    # find_spec locates the package without importing it.
    (location,) = importlib.util.find_spec("airflow").submodule_search_locations
    return Path(location) / name


def test_provider_info_matches_airflows_schema():
    import jsonschema

    info = get_provider_info()
    schema = json.loads(_airflow_file("provider_info.schema.json").read_text())
    jsonschema.validate(info, schema)
    (conn_type,) = info["connection-types"]
    assert conn_type["connection-type"] == "interlock_flyte"  # not flyteorg provider's "flyte"
    assert conn_type["hook-class-name"] == "interlock.plugins.airflow.hook.FlyteHook"
    assert info["package-name"] == "interlock"
    for section in ("operators", "sensors", "hooks", "triggers"):
        for module in info[section][0]["python-modules"]:
            assert importlib.util.find_spec(module) is not None, module


@pytest.mark.parametrize("setting, expected", [(None, False), ("True", True), ("False", False)])
def test_deferrable_defaults_to_airflows_operators_setting(monkeypatch, setting, expected):
    """As Airflow's own providers: `[operators] default_deferrable`, unless the DAG says."""
    from interlock.plugins.airflow.operators import FlyteLaunchPlanOperator
    from interlock.plugins.airflow.sensors import FlyteExecutionSensor

    if setting is None:
        monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", setting)
    launch = FlyteLaunchPlanOperator(task_id="launch", launch_plan="lp")
    watch = FlyteExecutionSensor(task_id="watch", execution_name="e1")
    assert launch.deferrable is expected and watch.deferrable is expected
    assert FlyteLaunchPlanOperator(task_id="pinned", launch_plan="lp", deferrable=not expected).deferrable is (not expected)
