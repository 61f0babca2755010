"""ML Metadata lineage plugin, against the real ml-metadata library in its own venv.

The mlmd interpreter comes from $INTERLOCK_MLMD_PYTHON (CI creates it with
``interlock.plugins.mlmd.setup_env``); tests that need it skip when it is absent.
The store is SQLite under tmp_path. A second, independent reader (a script run with the
official library directly) checks what was written, so the worker does not grade itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import first_block_after

from interlock.core.base.errors import InterlockError, LineageUnavailable
from interlock.core.cli.main import main as cli_main
from interlock.core.record.lineage import LineageProvider, lineage_provider
from interlock.plugins.mlmd import (
    PYTHON_ENV_VAR,
    LineageConnectionError,
    LineageInputError,
    LineageNotFound,
    LineageStore,
    LineageStoreError,
    MlmdLineage,
    MlmdUnavailable,
    format_chain,
    lineage_command,
    resolve_python,
)
from interlock.plugins.mlmd.provider import SQLITE_ENV

GIT_SHA = "3f9c2a7e1b4d5c6e7f8091a2b3c4d5e6f7a8b9c0"


def _mlmd_python() -> str | None:
    path = os.environ.get(PYTHON_ENV_VAR)
    return path if path and os.access(path, os.X_OK) else None


MLMD_PYTHON = _mlmd_python()
needs_mlmd = pytest.mark.skipif(
    MLMD_PYTHON is None,
    reason=f"no ml-metadata interpreter: set {PYTHON_ENV_VAR} to a venv python with "
    "ml-metadata==1.17.1 (create one with interlock.plugins.mlmd.setup_env(DIR))",
)


# --------------------------------------------------------------------------- data


def _port(name: str, uri: str, type_: str, **props: Any) -> dict[str, Any]:
    return {"name": name, "uri": uri, "type": type_, "properties": props}


def four_step_run(
    root: Path,
    run_id: str,
    *,
    cached: tuple[str, ...] = (),
    features: str = "features",
    model: str = "model",
    snapshot: str = "2026-11-01",
) -> dict[str, Any]:
    """ingest -> validate -> featurize -> train, shaped like a run receipt."""
    uri = lambda name: (root / name).as_uri()  # noqa: E731
    steps = [
        ("ingest", "python:3.11", [], [_port("raw", uri("raw"), "system.Dataset", rows=1000)]),
        (
            "validate",
            "python:3.11",
            [_port("raw", uri("raw"), "system.Dataset")],
            [_port("clean", uri("clean"), "system.Dataset")],
        ),
        (
            "featurize",
            "python:3.11",
            [_port("clean", uri("clean"), "system.Dataset")],
            [_port("features", uri(features), "system.Dataset")],
        ),
        (
            "train",
            "ghcr.io/acme/trainer:1.4",
            [_port("features", uri(features), "system.Dataset")],
            [
                _port("model", uri(model), "system.Model", framework="torch"),
                _port("metrics", uri(model + "-metrics"), "system.Metrics", auc=0.91),
            ],
        ),
    ]
    return {
        "pipeline": "fraud-retrain",
        "run_id": run_id,
        "backend": "kfp-local",
        "git_sha": GIT_SHA,
        "git_dirty": False,
        "parameters": {"snapshot": snapshot, "epochs": 3},
        "steps": [
            {
                "name": name,
                "image": image,
                "image_digest": "sha256:" + "ab" * 32 if name == "train" else None,
                "state": "COMPLETE",
                "cached": name in cached,
                "snapshots": [snapshot] if name == "ingest" else [],
                "started": 10.0 * i,
                "ended": 10.0 * i + 5,
                "inputs": inputs,
                "outputs": outputs,
            }
            for i, (name, image, inputs, outputs) in enumerate(steps)
        ],
    }


_RAW_DUMP = r"""
import json, sys
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2 as pb
c = pb.ConnectionConfig()
c.sqlite.filename_uri = sys.argv[1]
c.sqlite.connection_mode = pb.SqliteMetadataSourceConfig.READONLY
s = metadata_store.MetadataStore(c)
def props(m):
    return {k: getattr(v, v.WhichOneof("value")) for k, v in m.custom_properties.items()}
atypes = {t.id: t.name for t in s.get_artifact_types()}
etypes = {t.id: t.name for t in s.get_execution_types()}
ctypes = {t.id: t.name for t in s.get_context_types()}
arts = s.get_artifacts(); exes = s.get_executions(); ctxs = s.get_contexts()
out = {
  "artifacts": [{"id": a.id, "uri": a.uri, "type": atypes[a.type_id], "props": props(a)} for a in arts],
  "executions": [{"id": e.id, "name": e.name, "type": etypes[e.type_id],
                  "state": pb.Execution.State.Name(e.last_known_state), "props": props(e),
                  "contexts": sorted(x.name for x in s.get_contexts_by_execution(e.id))} for e in exes],
  "contexts": [{"id": x.id, "name": x.name, "type": ctypes[x.type_id], "props": props(x),
                "parents": [p.name for p in s.get_parent_contexts_by_context(x.id)],
                "artifacts": sorted(a.uri for a in s.get_artifacts_by_context(x.id))} for x in ctxs],
  "events": [{"artifact": ev.artifact_id, "execution": ev.execution_id,
              "type": pb.Event.Type.Name(ev.type), "port": ev.path.steps[0].key}
             for ev in s.get_events_by_artifact_ids([a.id for a in arts])],
}
print(json.dumps(out))
"""


def raw_dump(sqlite: Path) -> dict[str, Any]:
    """Read the store with the official library directly, bypassing the plugin."""
    assert MLMD_PYTHON is not None
    done = subprocess.run(
        [MLMD_PYTHON, "-I", "-c", _RAW_DUMP, str(sqlite)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.fixture
def store(tmp_path: Path):
    with LineageStore(sqlite_path=tmp_path / "mlmd" / "store.sqlite", python=MLMD_PYTHON) as s:
        yield s


# --------------------------------------------------------------------------- recording


@needs_mlmd
def test_record_writes_kfp_types_events_and_contexts(store: LineageStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = store.record_run(four_step_run(data, "r-20261129-abc"))
    assert result.recorded == ["ingest", "validate", "featurize", "train"]
    assert result.skipped == []

    raw = raw_dump(tmp_path / "mlmd" / "store.sqlite")
    ctx = {c["type"]: c for c in raw["contexts"]}
    assert set(ctx) == {"system.Pipeline", "system.PipelineRun"}
    assert ctx["system.Pipeline"]["name"] == "fraud-retrain"
    run_ctx = ctx["system.PipelineRun"]
    assert run_ctx["name"] == "r-20261129-abc"
    assert run_ctx["parents"] == ["fraud-retrain"]
    assert run_ctx["props"]["git_sha"] == GIT_SHA
    assert run_ctx["props"]["git_dirty"] is False
    assert json.loads(run_ctx["props"]["parameters"]) == {"snapshot": "2026-11-01", "epochs": 3}

    # Five distinct URIs -> five artifacts, although raw/clean/features appear twice each.
    types = {Path(a["uri"]).name: a["type"] for a in raw["artifacts"]}
    assert types == {
        "raw": "system.Dataset",
        "clean": "system.Dataset",
        "features": "system.Dataset",
        "model": "system.Model",
        "model-metrics": "system.Metrics",
    }
    assert {a["uri"] for a in raw["artifacts"]} == set(run_ctx["artifacts"])

    exes = {e["props"]["display_name"]: e for e in raw["executions"]}
    assert set(exes) == {"ingest", "validate", "featurize", "train"}
    for e in exes.values():
        assert e["type"] == "system.ContainerExecution"
        assert e["state"] == "COMPLETE"
        assert e["contexts"] == ["fraud-retrain", "r-20261129-abc"]
        assert e["props"]["git_sha"] == GIT_SHA
        assert e["props"]["run_id"] == "r-20261129-abc"
    assert json.loads(exes["ingest"]["props"]["snapshot_ids"]) == ["2026-11-01"]
    assert exes["train"]["props"]["image"] == "ghcr.io/acme/trainer:1.4"
    assert exes["train"]["props"]["image_digest"] == "sha256:" + "ab" * 32

    # raw: one OUTPUT from ingest, one INPUT into validate, both on port "raw".
    raw_id = next(a["id"] for a in raw["artifacts"] if a["uri"].endswith("/raw"))
    raw_events = sorted(
        (e["type"], e["execution"], e["port"]) for e in raw["events"] if e["artifact"] == raw_id
    )
    assert raw_events == [
        ("INPUT", exes["validate"]["id"], "raw"),
        ("OUTPUT", exes["ingest"]["id"], "raw"),
    ]
    metrics = next(a for a in raw["artifacts"] if a["type"] == "system.Metrics")
    assert metrics["props"]["auc"] == pytest.approx(0.91)


@needs_mlmd
def test_recording_the_same_run_twice_adds_nothing(store: LineageStore, tmp_path: Path) -> None:
    run = four_step_run(tmp_path / "data", "r1")
    first = store.record_run(run)
    before = raw_dump(tmp_path / "mlmd" / "store.sqlite")
    again = store.record_run(run)
    after = raw_dump(tmp_path / "mlmd" / "store.sqlite")
    assert again.recorded == []
    assert again.skipped == ["ingest", "validate", "featurize", "train"]
    assert again.execution_ids == first.execution_ids
    assert len(after["events"]) == len(before["events"]) == 8
    assert len(after["executions"]) == 4


@needs_mlmd
def test_malformed_record_is_rejected_with_the_field_named(store: LineageStore) -> None:
    bad = {"pipeline": "p", "run_id": "r", "steps": [{"name": "s", "outputs": [{"name": "x"}]}]}
    with pytest.raises(LineageInputError, match="step 's'.*'uri'") as err:
        store.record_run(bad)
    assert err.value.code == "LINEAGE_INPUT"
    unknown_state = {"pipeline": "p", "run_id": "r", "steps": [{"name": "s", "state": "WEIRD"}]}
    with pytest.raises(LineageInputError, match="unknown state 'WEIRD'"):
        store.record_run(unknown_state)
    twice = {"pipeline": "p", "run_id": "r", "steps": [{"name": "s"}, {"name": "s"}]}
    with pytest.raises(LineageInputError, match="'s' appears twice"):
        store.record_run(twice)
    assert store.runs() == []  # a rejected record writes nothing, not even its run context


# --------------------------------------------------------------------------- queries


@needs_mlmd
def test_upstream_from_model_uri_reaches_ingest_snapshot_git_and_image(
    store: LineageStore, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    store.record_run(four_step_run(data, "r1"))
    chain = store.upstream((data / "model").as_uri())

    assert chain.kind == "artifact"
    [model] = chain.roots
    assert (model.type, model.name, model.runs) == ("system.Model", "model", ["r1"])
    assert model.properties["framework"] == "torch"

    train = model.produced_by
    assert train is not None and train.step == "train"
    assert train.image == "ghcr.io/acme/trainer:1.4"
    assert train.image_digest == "sha256:" + "ab" * 32
    assert train.git_sha == GIT_SHA and train.git_dirty is False
    assert [a.uri for a in train.inputs] == [(data / "features").as_uri()]
    assert train.input_ports == ["features"]
    assert train.inputs[0].type == "system.Dataset"

    assert [e.step for e in chain.executions()] == ["train", "featurize", "validate", "ingest"]
    assert [Path(a.uri).name for a in chain.artifacts()] == ["model", "features", "clean", "raw"]
    ingest = chain.execution("ingest")
    assert ingest.snapshots == ["2026-11-01"]
    assert ingest.run_id == "r1" and ingest.state == "COMPLETE"
    assert chain.artifact((data / "raw").as_uri()).produced_by is ingest
    assert chain.artifact((data / "raw").as_uri()).properties["rows"] == 1000
    assert chain.snapshots() == ["2026-11-01"]

    text = format_chain(chain)
    assert "train [COMPLETE]" in text and "ghcr.io/acme/trainer:1.4@sha256:" in text
    assert "snapshots 2026-11-01" in text and GIT_SHA[:12] + " (clean)" in text
    # A plain absolute path finds the file:// artifact too.
    assert store.upstream(str(data / "model")).roots[0].id == model.id


@needs_mlmd
def test_upstream_by_run_id_starts_from_the_runs_final_outputs(
    store: LineageStore, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    store.record_run(four_step_run(data, "r-20261129-abc"))
    chain = store.upstream("r-20261129-abc")
    assert chain.kind == "run"
    assert chain.run is not None
    assert chain.run.pipeline == "fraud-retrain"
    assert chain.run.parameters == {"snapshot": "2026-11-01", "epochs": 3}
    assert chain.run.steps == ["ingest", "validate", "featurize", "train"]
    assert [Path(r.uri).name for r in chain.roots] == ["model", "model-metrics"]
    assert {e.step for e in chain.executions()} == {"ingest", "validate", "featurize", "train"}
    assert chain.execution("ingest").snapshots == ["2026-11-01"]
    assert store.upstream(run_id="r-20261129-abc").roots[0].uri == chain.roots[0].uri

    text = lineage_command("r-20261129-abc", sqlite=str(store.address), python=MLMD_PYTHON)
    assert text.startswith("run r-20261129-abc  pipeline fraud-retrain  backend kfp-local")
    assert '"epochs": 3' in text and "ingest [COMPLETE]" in text


@needs_mlmd
def test_two_runs_share_a_cached_artifact(store: LineageStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = store.record_run(four_step_run(data, "r1"))
    # Run 2 hits the cache for ingest and validate, then featurizes and trains anew.
    store.record_run(
        four_step_run(
            data, "r2", cached=("ingest", "validate"), features="features2", model="model2"
        )
    )

    raw = raw_dump(tmp_path / "mlmd" / "store.sqlite")
    raw_uri = (data / "raw").as_uri()
    assert [a["uri"] for a in raw["artifacts"]].count(raw_uri) == 1
    raw_id = next(a["id"] for a in raw["artifacts"] if a["uri"] == raw_uri)
    states = {e["id"]: (e["name"], e["state"]) for e in raw["executions"]}
    producers = sorted(
        states[e["execution"]]
        for e in raw["events"]
        if e["artifact"] == raw_id and e["type"] == "OUTPUT"
    )
    assert producers == [("r1/ingest", "COMPLETE"), ("r2/ingest", "CACHED")]
    cached_ingest = next(e for e in raw["executions"] if e["name"] == "r2/ingest")
    assert cached_ingest["props"]["cached_execution_id"] == first.execution_ids["ingest"]
    assert cached_ingest["props"]["cached_from_run"] == "r1"

    chain = store.upstream((data / "model2").as_uri())
    shared = chain.artifact(raw_uri)
    assert shared.runs == ["r1", "r2"]
    assert [(e.step, e.run_id, e.state) for e in chain.executions()] == [
        ("train", "r2", "COMPLETE"),
        ("featurize", "r2", "COMPLETE"),
        ("validate", "r2", "CACHED"),
        ("ingest", "r2", "CACHED"),
    ]
    ingest = chain.execution("ingest")
    assert ingest.cached and ingest.cached_from == first.execution_ids["ingest"]
    assert ingest.cached_from_run == "r1"
    assert ingest.snapshots == ["2026-11-01"]
    assert "cache hit of execution" in format_chain(chain)

    # Run 1's model still leads to run 1's own executions.
    old = store.upstream((data / "model").as_uri())
    assert {e.run_id for e in old.executions()} == {"r1"}
    assert old.artifact(raw_uri).runs == ["r1", "r2"]

    runs = {r.run_id: r for r in store.runs()}
    assert set(runs) == {"r1", "r2"}
    assert (runs["r1"].cached_steps, runs["r2"].cached_steps) == (0, 2)
    assert [r.run_id for r in store.runs(pipeline="fraud-retrain")] == ["r1", "r2"]
    assert store.runs(pipeline="other") == []


@needs_mlmd
def test_unknown_target_is_a_clear_not_found(store: LineageStore) -> None:
    with pytest.raises(LineageNotFound, match="neither a run id nor an artifact URI"):
        store.upstream("no-such-run")
    with pytest.raises(LineageNotFound, match="no artifact with uri"):
        store.upstream("s3://bucket/missing")
    # The worker survives errors and keeps serving the same store.
    assert store.ping() == "1.17.1"


@needs_mlmd
def test_querying_a_store_that_does_not_exist_does_not_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "lineage" / "mlmd.sqlite"
    with pytest.raises(LineageNotFound, match="nothing has been recorded"):
        lineage_command("r1", sqlite=str(missing), python=MLMD_PYTHON)
    assert not missing.parent.exists()


@needs_mlmd
def test_unreachable_grpc_service_fails_fast_and_retryable() -> None:
    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LineageConnectionError, match=f"127.0.0.1:{port}") as err:
        LineageStore(grpc_host="127.0.0.1", grpc_port=port, python=MLMD_PYTHON, grpc_timeout=5)
    assert err.value.code == "MLMD_CONNECTION" and err.value.retryable


# --------------------------------------------------------------------------- no interpreter


def test_missing_interpreter_names_the_setup_command(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "bin" / "python"
    with pytest.raises(MlmdUnavailable) as err:
        LineageStore(sqlite_path=tmp_path / "s.sqlite", python=missing)
    assert err.value.code == "MLMD_UNAVAILABLE"
    assert isinstance(err.value, InterlockError)
    assert str(missing) in str(err.value)
    assert "interlock lineage --setup" in str(err.value)
    assert not (tmp_path / "s.sqlite").exists()


def test_default_interpreter_lives_under_interlock_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PYTHON_ENV_VAR, raising=False)
    monkeypatch.setenv("INTERLOCK_HOME", str(tmp_path / "home"))
    with pytest.raises(MlmdUnavailable, match=str(tmp_path / "home" / "mlmd-venv")):
        resolve_python()
    monkeypatch.setenv(PYTHON_ENV_VAR, sys.executable)
    assert resolve_python() == sys.executable
    assert resolve_python(python=sys.executable) == sys.executable


def test_interpreter_without_ml_metadata_is_reported(tmp_path: Path) -> None:
    probe = subprocess.run([sys.executable, "-I", "-c", "import ml_metadata"], check=False)
    if probe.returncode == 0:
        pytest.skip("this interpreter has ml_metadata; the case needs one without it")
    with pytest.raises(MlmdUnavailable, match="cannot import ml_metadata"):
        LineageStore(sqlite_path=tmp_path / "s.sqlite", python=sys.executable)


@needs_mlmd
def test_a_failed_step_without_outputs_still_shows_in_the_run(
    store: LineageStore, tmp_path: Path
) -> None:
    run = four_step_run(tmp_path / "data", "r-failed")
    train = run["steps"][3]
    train.update(state="FAILED", outputs=[], attempts=1, failure_kind="FATAL")
    store.record_run(run)

    chain = store.upstream("r-failed")
    assert chain.roots == []  # every recorded output was consumed by a later step
    [failed] = chain.root_executions
    assert (failed.step, failed.state) == ("train", "FAILED")
    assert failed.properties["failure_kind"] == "FATAL"
    assert [Path(a.uri).name for a in failed.inputs] == ["features"]
    assert [e.step for e in chain.executions()] == ["train", "featurize", "validate", "ingest"]
    text = format_chain(chain)
    assert "train [FAILED]" in text and "(no outputs)" in text
    assert "snapshots 2026-11-01" in text


@needs_mlmd
def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    code = first_block_after("docs/lineage.md", "### Local runs")
    env = {**os.environ, PYTHON_ENV_VAR: str(MLMD_PYTHON)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "<- ingest [COMPLETE]  run r1  image python:3.11" in done.stdout
    assert "['2026-11-01'] 3f9c2a7e python:3.11" in done.stdout
    assert (tmp_path / "build" / "mlmd.sqlite").is_file()


@needs_mlmd
def test_two_writers_racing_on_a_new_uri_share_one_artifact(tmp_path: Path) -> None:
    path = tmp_path / "mlmd" / "store.sqlite"
    errors: list[BaseException] = []

    def record(store: LineageStore, run_id: str, uri: str) -> None:
        step = {"name": "make", "outputs": [_port("out", uri, "system.Dataset")]}
        try:
            store.record_run({"pipeline": "race", "run_id": run_id, "steps": [step]})
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    with (
        LineageStore(sqlite_path=path, python=MLMD_PYTHON) as a,
        LineageStore(sqlite_path=path, python=MLMD_PYTHON) as b,
    ):
        assert a.worker_pid != b.worker_pid
        for i in range(3):
            uri = (tmp_path / f"shared{i}").as_uri()
            threads = [
                threading.Thread(target=record, args=(s, f"{name}{i}", uri))
                for s, name in ((a, "a"), (b, "b"))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert errors == []
    raw = raw_dump(path)
    uris = [a["uri"] for a in raw["artifacts"]]
    assert sorted(uris) == sorted({*uris}) and len(uris) == 3
    assert len(raw["executions"]) == 6
    assert [c["name"] for c in raw["contexts"] if c["type"] == "system.Pipeline"] == ["race"]


@needs_mlmd
def test_one_worker_serves_every_call_and_its_death_is_reported(
    store: LineageStore, tmp_path: Path
) -> None:
    pid = store.worker_pid
    store.record_run(four_step_run(tmp_path / "data", "r1"))
    store.upstream("r1")
    store.runs()
    assert store.worker_pid == pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(LineageStoreError, match="worker"):
        store.ping()


# --------------------------------------------------------------------------- the core seam


def test_the_plugin_is_the_installed_lineage_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERLOCK_LINEAGE", raising=False)
    provider = lineage_provider()  # entry point mlmd, group interlock.lineage
    assert isinstance(provider, MlmdLineage) and isinstance(provider, LineageProvider)
    assert (provider.name, provider.title) == ("mlmd", "ML Metadata")
    assert issubclass(MlmdUnavailable, LineageUnavailable)  # what adapters catch


@needs_mlmd
def test_runs_recorded_through_the_seam_are_found_by_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INTERLOCK_LINEAGE", raising=False)
    monkeypatch.delenv(SQLITE_ENV, raising=False)
    provider = lineage_provider()
    work = tmp_path / "wd"
    where = provider.record_run(four_step_run(tmp_path / "data", "r-cli"), workdir=work)
    assert where == str(work / "lineage" / "mlmd.sqlite")

    assert cli_main(["lineage", "--workdir", str(work), "r-cli"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run r-cli  pipeline fraud-retrain  backend kfp-local")
    assert out.rstrip("\n") == provider.upstream("r-cli", workdir=work)
    model = (tmp_path / "data" / "model").as_uri()
    assert cli_main(["lineage", "--sqlite", where, model]) == 0
    assert f"model  system.Model  {model}  runs r-cli" in capsys.readouterr().out

    # $INTERLOCK_MLMD_SQLITE moves the store for recording and querying alike.
    monkeypatch.setenv(SQLITE_ENV, str(tmp_path / "elsewhere.sqlite"))
    assert provider.record_run(four_step_run(tmp_path / "data", "r-env"), workdir=work) == str(
        tmp_path / "elsewhere.sqlite"
    )
    assert cli_main(["lineage", "--workdir", str(work), "r-env"]) == 0
    assert capsys.readouterr().out.startswith("run r-env")

    assert cli_main(["lineage", "--workdir", str(work)]) == 1
    assert "lineage needs a MODEL_URI or RUN_ID (or --setup)" in capsys.readouterr().err


@needs_mlmd
def test_cli_setup_reuses_a_ready_env(capsys: pytest.CaptureFixture[str]) -> None:
    # The command line tests/run.sh uses: `interlock lineage --setup --env DIR`.
    assert MLMD_PYTHON is not None
    env = Path(MLMD_PYTHON).parents[1]
    assert cli_main(["lineage", "--setup", "--env", str(env)]) == 0
    assert capsys.readouterr().out.strip() == str(env / "bin" / "python")
