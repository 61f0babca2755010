"""fraud-retrain end to end on the default backend: the README's main command, promotion,
a worse challenger, a cached rerun, corrupted snapshots. Real MLflow (SQLite in tmp_path).

One module-scoped history of runs shares a workdir (so the cache is shared) and a registry:
  1. a deliberately weak config, first ever run  -> no champion yet: promoted (v1)
  2. the main command, `interlock run ...`       -> beats v1 by more than the margin (v2)
  3. the same inputs again                       -> served from cache; a tie is not promoted
  4. the weak config again                       -> worse than the champion: not registered
  5. corrupted snapshots                          -> stop at validation, nothing registered
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import interlock as il
from interlock.plugins.mlflow import MlflowRegistry
from reference_pipelines.fraud_model import TrainParams
from reference_pipelines.fraud_retrain import MODEL_NAME, fraud_retrain

ROOT = Path(__file__).resolve().parents[2]
WEAK = TrainParams(hidden=2, epochs=1, lr=0.0005)
TRAINING = ["ingest", "validate", "transform", "train"]
GIT_SHA = "0123456789abcdef0123456789abcdef01234567"


@dataclasses.dataclass
class History:
    home: Path
    registry_uri: str
    runs: dict[str, il.RunResult]
    cli: subprocess.CompletedProcess[str]

    def registry(self) -> MlflowRegistry:
        return MlflowRegistry(tracking_uri=self.registry_uri)

    def versions(self) -> list[Any]:
        return self.registry().client.search_model_versions(f"name='{MODEL_NAME}'")


def _receipt(result: il.RunResult) -> dict[str, Any]:
    return json.loads(Path(result.receipt_path).read_text())


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    home = tmp_path_factory.mktemp("fraud-local")
    workdir = home / ".interlock"
    registry = str(workdir / "mlflow")  # the default the CLI run below resolves to
    runs: dict[str, il.RunResult] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.setenv("INTERLOCK_GIT_SHA", GIT_SHA)

        def run(name: str, **params: Any) -> None:
            runs[name] = il.run(fraud_retrain, "local", workdir=workdir, raise_on_failure=False,
                                registry=registry, **params)

        run("weak_first", params=dataclasses.asdict(WEAK))
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        cli = subprocess.run(
            # The defaults given explicitly: with none, a refresh run trains the champion's
            # (the weak) hyperparameters again.
            [sys.executable, "-m", "interlock.core.cli.main", "run", str(ROOT / "reference_pipelines" / "fraud_retrain.py"),
             "-p", f"params={json.dumps(dataclasses.asdict(TrainParams()))}"],
            cwd=home, env=env, capture_output=True, text=True, timeout=600,
        )
        run("rerun")
        run("unchanged")  # the champion is still the one "rerun" compared against
        run("weak_again", params=dataclasses.asdict(WEAK))
        for mode in ("range", "missing", "shift"):
            run(f"corrupt-{mode}", snapshot=f"corrupt-{mode}:2026-11-01")
    return History(home, f"sqlite:///{Path(registry) / 'mlflow.db'}", runs, cli)


def _main_receipt(h: History) -> dict[str, Any]:
    line = next(x for x in h.cli.stdout.splitlines() if x.strip().startswith("receipt:"))
    return json.loads((h.home / line.split("receipt:", 1)[1].strip()).read_text())


# -- 1. the first run: no champion yet ----------------------------------------------------------
def test_first_run_without_a_champion_is_promoted(history):
    r = history.runs["weak_first"]
    assert r.succeeded, r.error
    assert r["promoted"] is True
    assert r["decision"].startswith("no champion yet")
    assert dict(r["champion"]) == {}
    assert r["champion_before"] == "none"
    assert set(r["challenger"]) == {"auc", "precision_at_100"}


# -- 2. the main command ----------------------------------------------------------------------------
def test_main_command_prints_progress_and_a_summary(history):
    cli = history.cli
    assert cli.returncode == 0, cli.stderr[-3000:]
    # Progress, one line per step event: run 1 already computed this snapshot's data steps.
    for step in ("ingest", "validate", "transform"):
        assert f"== {step}" in cli.stderr
    for step in ("train", "find_champion", "evaluate", "champion_gate", "register"):
        assert f".. {step}" in cli.stderr and f"ok {step}" in cli.stderr
    out = cli.stdout
    assert "fraud-retrain: succeeded" in out
    assert "promoted: True" in out
    assert "decision: 'promote: challenger auc=" in out
    assert "challenger: auc=" in out and "precision_at_100=" in out
    assert "champion_before: '1'" in out
    assert "registered fraud-detector version 2; champion: 1 -> 2" in out
    assert _main_receipt(history)["status"] == "succeeded"


def test_better_challenger_moves_the_champion_alias_and_keeps_the_old_version(history):
    reg = history.registry()
    aliases = reg.aliases(MODEL_NAME)
    assert aliases["champion"] == "2"
    assert aliases["previous-champion"] == "1"
    assert sorted(str(v.version) for v in history.versions()) == ["1", "2"]
    receipt = _main_receipt(history)
    register = next(s for s in receipt["steps"] if s["node"] == "register")
    assert register["facts"]["model_version"] == "2"
    assert register["facts"]["previous_champion"] == "1"


def test_model_version_carries_receipt_tags_and_a_pickle_free_model(history, tmp_path):
    reg = history.registry()
    info = reg.describe(MODEL_NAME, "2")
    receipt = _main_receipt(history)
    assert info.tags["interlock.run_id"] == receipt["run_id"]
    assert info.tags["interlock.snapshot"] == "2026-11-01"
    assert info.tags["interlock.git_sha"] == GIT_SHA
    assert info.tags["interlock.pipeline"] == "fraud-retrain"
    assert info.tags["precision"] == "fp32"
    assert float(info.tags["auc"]) == pytest.approx(history.runs["rerun"]["challenger"]["auc"], abs=1e-6)
    run = reg.client.get_run(info.run_id)
    # The version belongs to the pipeline run's own MLflow run: its parameters are the
    # pipeline's (`params` is the TrainParams parameter, flattened with dots).
    assert run.data.tags["interlock.run_id"] == receipt["run_id"]
    assert run.data.params["margin"] == "0.01"
    assert run.data.params["params.epochs"] == str(TrainParams().epochs)
    assert run.data.params["snapshot"] == "2026-11-01"
    assert set(run.data.metrics) >= {"auc", "precision_at_100", "valid_auc"}
    model_dir = reg.download(MODEL_NAME, "2", tmp_path / "dl")
    # An MLflow model (MLmodel, signature, input example) whose code is a file, not a pickle,
    # and whose weights are the train step's plain directory.
    assert (model_dir / "MLmodel").is_file() and (model_dir / "input_example.json").is_file()
    assert not [p for p in model_dir.rglob("*") if p.suffix in (".pkl", ".pickle", ".pt")]
    [weights] = model_dir.rglob("weights.npz")
    assert sorted(p.name for p in weights.parent.iterdir() if not p.name.startswith(".")) == [
        "config.json", "input_example.json", "preprocessing.json", "weights.npz",
    ]
    with np.load(weights, allow_pickle=False) as arrays:
        assert arrays.files


def test_receipt_names_the_snapshot_parameters_and_gpu_request(history):
    first = _receipt(history.runs["weak_first"])
    ingest = next(s for s in first["snapshots"] if s["node"] == "ingest")
    assert ingest["id"] == "2026-11-01" and ingest["rows"] == 20_000 and len(ingest["sha256"]) == 64
    # The main command found ingest in the cache (run 1 read the same snapshot), so it is
    # the evaluate step that declares the snapshot behind the metrics: same content hash.
    receipt = _main_receipt(history)
    assert receipt["cache_hits"] == ["ingest", "validate", "transform"]
    evaluated = next(s for s in receipt["snapshots"] if s["node"] == "evaluate")
    assert (evaluated["id"], evaluated["sha256"], evaluated["split"]) == ("2026-11-01", ingest["sha256"], "test")
    assert receipt["parameters"]["snapshot"] == "2026-11-01"
    assert receipt["parameters"]["margin"] == 0.01
    assert receipt["git"]["sha"] == GIT_SHA
    train = next(s for s in receipt["steps"] if s["node"] == "train")
    assert train["resources"]["gpu"] == 1 and train["resources"]["accelerator"] == "nvidia-h200"
    assert train["facts"]["device"] in ("cpu", "cuda")
    assert train["interruptible"] is True
    # What training used besides compute: reading its splits (data wait), one save per epoch.
    assert train["usage"]["data_wait_s"] > 0
    assert train["usage"]["checkpoints"] == train["facts"]["epochs"] and train["usage"]["checkpoint_s"] > 0
    assert receipt["totals"]["checkpoint_s"] >= train["usage"]["checkpoint_s"]
    if train["facts"]["device"] == "cpu":  # no GPU time billed: no ratio, and the summary says nothing of one
        assert train["gpu_efficiency"] is None and receipt["totals"]["gpu_efficiency"] is None
        assert "GPU efficiency" not in history.cli.stdout


# -- 3. identical inputs: cache, and a tie is not a win ---------------------------------------------
def test_rerun_with_identical_inputs_is_served_from_cache(history):
    r = history.runs["rerun"]
    assert r.succeeded, r.error
    assert [n for n in TRAINING if r.steps[n].status == "cached"] == TRAINING
    # The champion moved since the main command's evaluation (it promoted version 2), and the
    # registry tells: evaluate is keyed on the champion version.
    assert r.steps["find_champion"].status == "succeeded"
    assert r.steps["evaluate"].status == "succeeded"
    assert r.steps["register"].status == "skipped"
    assert r["promoted"] is False
    assert dict(r["challenger"]) == dict(r["champion"])  # the same model, scored twice
    assert "keep champion" in r["decision"] and "gain +0.0000" in r["decision"]
    receipt = _receipt(r)
    assert receipt["cache_hits"] == TRAINING
    # The cached ingest still names the snapshot it read (replayed from the cache entry), and
    # the evaluation declares the held-out split its metrics come from.
    by_node = {s["node"]: s for s in receipt["snapshots"]}
    assert set(by_node) == {"ingest", "evaluate"}
    assert {s["id"] for s in receipt["snapshots"]} == {"2026-11-01"}
    assert by_node["ingest"]["rows"] == 20_000 and by_node["evaluate"]["split"] == "test"
    assert by_node["ingest"]["sha256"] == by_node["evaluate"]["sha256"]


def test_an_unchanged_rerun_is_served_from_cache_end_to_end(history):
    r, before = history.runs["unchanged"], history.runs["rerun"]
    assert r.succeeded, r.error
    # Only the registry lookup and the gate run: the champion is the version "rerun" scored.
    ran = {n for n, o in r.steps.items() if o.status == "succeeded"}
    assert ran == {"champion_params", "find_champion", "champion_gate"}, {n: o.status for n, o in r.steps.items()}
    assert r.steps["evaluate"].status == "cached" and r.steps["register"].status == "skipped"
    assert (dict(r["challenger"]), dict(r["champion"]), r["champion_before"]) == (
        dict(before["challenger"]), dict(before["champion"]), before["champion_before"])
    receipt = _receipt(r)
    assert {s["node"] for s in receipt["snapshots"]} >= {"ingest", "evaluate"}  # replayed from the cache


# -- 4. a worse challenger --------------------------------------------------------------------------
def test_worse_challenger_is_not_registered(history):
    r = history.runs["weak_again"]
    assert r.succeeded, r.error
    assert r["promoted"] is False
    assert r["challenger"]["auc"] < r["champion"]["auc"] - 0.01
    assert r["champion_before"] == "2"
    assert r.steps["register"].status == "skipped"
    assert r.steps["train"].status == "cached"  # the weak config was trained in run 1
    assert history.registry().champion(MODEL_NAME) == "2"
    assert len(history.versions()) == 2


# -- 5. corrupted snapshots ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("range", "column 'amount': greater_than(0.0)"),
        ("missing", "column 'card_age_days': column_in_dataframe"),
        ("shift", "column 'amount': distribution_shift"),
    ],
)
def test_corrupted_snapshot_stops_at_validation_with_the_report(history, mode, expected):
    r = history.runs[f"corrupt-{mode}"]
    assert r.status == "failed"
    assert r.steps["ingest"].status == "succeeded"
    assert r.steps["validate"].status == "failed"
    downstream = ("transform", "champion_params", "train", "find_champion", "evaluate", "champion_gate", "register")
    assert {r.steps[n].status for n in downstream} == {"not-run"}
    assert isinstance(r.error, il.StepFailed) and r.error.kind == "FATAL"
    failure = r.steps["validate"].failure
    assert failure["exc_type"].endswith("ValidationFailed")
    assert expected in failure["message"]
    assert r.steps["validate"].attempts == 1  # FATAL: not retried
    step = next(s for s in _receipt(r)["steps"] if s["node"] == "validate")
    assert expected in step["attempts"][-1]["failure"]["message"]


def test_corrupted_snapshots_register_nothing_and_leave_the_champion(history):
    assert history.registry().aliases(MODEL_NAME) == {"champion": "2", "previous-champion": "1"}
    assert len(history.versions()) == 2


# -- MLflow as its users see it -------------------------------------------------------------------
def _mlflow_runs(h: History) -> dict[str, Any]:
    """interlock run id -> the pipeline run's MLflow run."""
    reg = h.registry()
    exp = reg.client.get_experiment_by_name("fraud-retrain")
    runs = reg.client.search_runs([exp.experiment_id], filter_string="tags.`interlock.kind` = 'pipeline'")
    return {r.data.tags["interlock.run_id"]: r for r in runs}


def test_every_run_is_one_mlflow_run_promoted_or_not_failed_or_not(history):
    runs = _mlflow_runs(history)
    main = _main_receipt(history)
    ours = {**{name: r.run_id for name, r in history.runs.items()}, "main": main["run_id"]}
    assert set(runs) == set(ours.values())  # seven pipeline runs, seven MLflow runs
    for name, run_id in ours.items():
        expected = "FAILED" if name.startswith("corrupt") else "FINISHED"
        assert runs[run_id].info.status == expected, name
    assert runs[ours["weak_again"]].data.tags["interlock.output.promoted"] == "false"
    assert runs[ours["rerun"]].data.tags["interlock.output.promoted"] == "false"  # a tie
    failed = runs[ours["corrupt-range"]]
    assert failed.data.tags["interlock.status"] == "failed"
    assert "ValidationFailed" in failed.data.tags["interlock.error"] or "validate" in failed.data.tags["interlock.error"]


def test_mlflow_run_has_standard_tags_params_curves_steps_and_receipt(history):
    reg = history.registry()
    main = _main_receipt(history)
    run = _mlflow_runs(history)[main["run_id"]]
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == GIT_SHA
    assert tags["mlflow.source.name"].endswith("fraud_retrain.py")
    assert tags["mlflow.runName"] == f"fraud-retrain-{main['run_id']}"
    assert tags["interlock.backend"] == "local"
    # The MLflow run spans the pipeline run, not the register step.
    assert int(main["started"] * 1000) - 10_000 <= run.info.start_time <= int(main["started"] * 1000)
    assert run.info.end_time == int(main["ended"] * 1000)
    epochs = TrainParams().epochs
    curve = reg.client.get_metric_history(run.info.run_id, "valid_auc")
    assert [m.step for m in curve] == list(range(1, epochs + 1))
    assert len({m.value for m in curve}) > 1  # a curve, not one point
    assert "challenger.auc" in run.data.metrics
    children = reg.client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run.info.run_id}'"
    )
    by_node = {c.data.tags["interlock.node"]: c for c in children}
    assert set(by_node) == {
        "ingest", "validate", "transform", "champion_params", "train", "find_champion", "evaluate", "champion_gate",
        "register",
    }  # the tune search was skipped: no runs for it
    assert by_node["ingest"].data.tags["interlock.cached"] == "true"  # run 1 computed this snapshot's data
    assert [m.step for m in reg.client.get_metric_history(by_node["train"].info.run_id, "loss")] == list(range(1, epochs + 1))
    assert "receipt.json" in [a.path for a in reg.client.list_artifacts(run.info.run_id)]


def test_champion_loads_with_mlflow_pyfunc_anywhere_and_predicts(history, tmp_path):
    from reference_pipelines.fraud_data import generate
    from reference_pipelines.fraud_model import INPUT_COLUMNS as COLUMNS

    # The pipeline's own raw rows, as ingest produces them (int64 columns included): what a
    # scoring service sends. Parquet keeps their dtypes on the way to the fresh interpreter.
    raw = generate("2026-11-02", rows=50)[list(COLUMNS)]
    raw.to_parquet(tmp_path / "raw.parquet")
    # A fresh interpreter outside the repository: the model carries its own code.
    code = (
        "import json, mlflow, pandas as pd\n"
        f"mlflow.set_tracking_uri({history.registry_uri!r})\n"
        f"m = mlflow.pyfunc.load_model('models:/{MODEL_NAME}@champion')\n"
        "p = m.predict(m.input_example)\n"
        "raw = m.predict(pd.read_parquet('raw.parquet'))\n"
        "print(json.dumps({'inputs': m.metadata.signature.inputs.input_names(), 'p': [float(x) for x in p],"
        " 'raw': len(raw)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    from reference_pipelines.fraud_model import INPUT_COLUMNS

    assert out["inputs"] == list(INPUT_COLUMNS)
    assert len(out["p"]) == 5 and all(0.0 <= x <= 1.0 for x in out["p"])
    assert out["raw"] == 50  # the signature accepts what ingest produces
