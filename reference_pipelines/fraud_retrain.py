"""fraud-retrain: the reference retraining pipeline (docs/walkthrough.md walks through it).

    interlock run reference_pipelines/fraud_retrain.py
    interlock run reference_pipelines/fraud_retrain.py -p snapshot=2026-12-01 -p margin=0.005
    interlock run reference_pipelines/fraud_retrain.py --backend kfp-local
    interlock run reference_pipelines/fraud_retrain.py -p mode=tune

ingest -> validate -> transform -> [refresh: champion_params | tune: search_space ->
trial x N -> pick_best] -> train -> evaluate -> champion_gate -> [register]

- ingest: a frozen, seeded snapshot (the id determines the data; see fraud_data).
- validate: the pandera contract plus a stored distribution baseline. A failure is
  ``il.ValidationFailed``: FATAL, the run stops, nothing downstream runs.
- transform: stratified split first, then encoders and scalers fitted on train only.
- the two modes (``mode``): ``refresh`` (the default, what the weekly schedule runs) trains
  with the champion's recorded hyperparameters (``params`` when there is no champion yet);
  ``tune`` (what a drift trigger asks for) runs a small search: each candidate of
  ``search_space`` trains briefly in its own ``trial`` (an ``il.map``), the best on the
  validation split wins, and ``train`` trains it fully. Either way the same gate decides.
- train: a small PyTorch MLP; GPU requested in the spec, CPU wherever there is none.
  Seeds fixed, a checkpoint per epoch, a retry resumes from the latest one.
- evaluate: the challenger and the registry's ``champion`` on the same held-out split.
- champion_gate: promote only by the margin fixed in advance (a parameter).
- register (only when the gate says so): an MLflow pyfunc model logged in the run's MLflow
  run, a model version, the ``champion`` alias, moved only if it still points at the
  champion that evaluate compared against.

Every run, promoted, not promoted or failed, is one MLflow run in experiment
``fraud-retrain`` (``track`` at the bottom: parameters, per-epoch ``loss``/``valid_auc``,
one nested run per step, the receipt); ``mlflow ui --backend-store-uri
sqlite:///.interlock/mlflow/mlflow.db`` shows them.

``registry``: an MLflow tracking URI or a directory for a SQLite store. Empty means
``$MLFLOW_TRACKING_URI`` when set, else ``.interlock/mlflow`` under the directory the run
starts in (resolved to an absolute path inside the steps that use it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

import pandas as pd

import interlock as il
from interlock.plugins.mlflow.tracker import track

from . import fraud_data, fraud_model, fraud_schema
from .fraud_model import TrainParams

if TYPE_CHECKING:
    from interlock.plugins.mlflow import MlflowRegistry

MODEL_NAME = "fraud-detector"
EXPERIMENT = "fraud-retrain"
SPLIT_SEED = 2026  # fixed, not a training knob: champion and challenger see the same test rows
DEFAULT_REGISTRY_DIR = Path(".interlock") / "mlflow"
DEFAULT_TRAIN = TrainParams()
TRIAL_EPOCHS = 2  # a candidate's short training in a tune run; the winner then trains fully
TRAIN_PARAMS_TAG = "interlock.train_params"  # on each registered version: what trained it
# Mondays 03:00 UTC: a refresh run, so the model never goes stale. Every backend renders it
# (a launch plan, a flyte.Trigger, a KFP recurring run, the DAG's schedule, a CronWorkflow);
# fraud_watch.py adds the data and drift triggers that `interlock watch` runs.
WEEKLY_REFRESH = il.Cron("0 3 * * 1", name="weekly-refresh")


class Evaluation(NamedTuple):
    challenger: il.Metrics
    # Empty when there is no champion yet: the gate then promotes. An empty Metrics rather
    # than None because a KFP Metrics artifact always exists once declared.
    champion: il.Metrics
    champion_version: str  # "none" when there is no champion yet


class Summary(NamedTuple):
    promoted: bool
    decision: str
    challenger: il.Metrics
    champion: il.Metrics
    champion_before: str


def open_registry(registry: str) -> MlflowRegistry:
    """The MLflow store a run uses: ``registry`` (URI or directory), else the environment's, else ./.interlock/mlflow."""
    from interlock.plugins.mlflow import registry_at

    return registry_at(registry, default_dir=DEFAULT_REGISTRY_DIR)


@il.step(cache=il.Cache(), resources=il.Resources(cpu="1", memory="1Gi"))
def ingest(snapshot: str, ctx: il.StepContext) -> pd.DataFrame:
    """Read the snapshot (an id, generated; or a file's path, as a data trigger passes it) and
    declare it (id or path, rows, content hash) for the receipt."""
    df = fraud_data.load(snapshot)
    ctx.record_snapshot(snapshot, rows=len(df), sha256=fraud_data.content_sha256(df))
    return df


@il.step(cache=il.Cache(version=fraud_schema.SCHEMA_VERSION), resources=il.Resources(cpu="1", memory="1Gi"))
def validate(raw: pd.DataFrame) -> pd.DataFrame:
    """The data gate: raises il.ValidationFailed (FATAL) with a per-column report."""
    from interlock.plugins.pandera import validate as pandera_validate

    return pandera_validate(raw, fraud_schema.schema(), step="validate")


@il.step(cache=il.Cache(version=fraud_model.MODEL_CODE_VERSION), resources=il.Resources(cpu="1", memory="1Gi"))
def transform(clean: pd.DataFrame, snapshot: str) -> il.Dataset:
    """Stratified train/valid/test split, then preprocessing fitted on the train split only."""
    # Split FIRST. Scalers and encoders fitted on all rows would carry the validation and
    # test rows' statistics into training (leakage), and the held-out metrics would flatter
    # the model. Everything fitted below sees `splits["train"]` and nothing else.
    splits = fraud_model.stratified_split(clean, seed=SPLIT_SEED)
    pre = fraud_model.fit_preprocessing(splits["train"])
    meta = {
        "snapshot": snapshot,
        "sha256": fraud_data.content_sha256(clean),
        "split_seed": SPLIT_SEED,
        "rows": {name: len(df) for name, df in splits.items()},
        "fraud_rate": {name: round(float(df[fraud_data.LABEL].mean()), 6) for name, df in splits.items()},
    }
    out = il.Dataset.new(meta)
    for name, df in splits.items():
        df.to_parquet(out / f"{name}.parquet", index=False)
    (out / fraud_model.PREPROCESSING_FILE).write_text(json.dumps(pre, indent=2, sort_keys=True))
    return out


@il.step(resources=il.Resources(cpu="1", memory="1Gi"))
def champion_params(registry: str, params: TrainParams | None) -> TrainParams:
    """A refresh run's hyperparameters: ``params`` when given, else those the champion was
    trained with (its version's ``interlock.train_params`` tag), else the defaults (no
    champion yet, or one that recorded none).

    Never cached: the champion lives outside the pipeline and moves.
    """
    if params is not None:
        return params
    reg = open_registry(registry)
    version = reg.champion(MODEL_NAME)
    recorded = reg.describe(MODEL_NAME, version).tags.get(TRAIN_PARAMS_TAG) if version else None
    if not recorded:
        return DEFAULT_TRAIN
    known = {f.name for f in dataclasses.fields(TrainParams)}
    return TrainParams(**{k: v for k, v in json.loads(recorded).items() if k in known})


@il.step(cache=il.Cache())
def search_space(params: TrainParams | None) -> list[TrainParams]:
    """A tune run's candidates around ``params`` (the defaults when None): learning rate
    x0.5/x1/x2, and a wider layer."""
    params = params or DEFAULT_TRAIN
    lrs = [params.lr * f for f in (0.5, 1.0, 2.0)]
    return [
        *(dataclasses.replace(params, lr=round(lr, 8)) for lr in lrs),
        dataclasses.replace(params, hidden=params.hidden * 2),
    ]


@il.step(
    cache=il.Cache(version=fraud_model.MODEL_CODE_VERSION),
    resources=il.Resources(cpu="2", memory="4Gi"),
    retry=il.Retry(transient=2, preempted=3),
    interruptible=True,
    labels={"team": "fraud"},
)
def trial(candidate: TrainParams, splits: il.Dataset) -> float:
    """One candidate trained for TRIAL_EPOCHS on the train split: its validation AUC."""
    pre = json.loads((splits / fraud_model.PREPROCESSING_FILE).read_text())
    train_df = pd.read_parquet(splits / "train.parquet")
    valid_df = pd.read_parquet(splits / "valid.parquet")
    _, history = fraud_model.fit(
        fraud_model.apply_preprocessing(train_df, pre), train_df[fraud_data.LABEL].to_numpy(),
        fraud_model.apply_preprocessing(valid_df, pre), valid_df[fraud_data.LABEL].to_numpy(),
        dataclasses.replace(candidate, epochs=min(candidate.epochs, TRIAL_EPOCHS)),
    )
    return float(history[-1]["valid_auc"])


@il.step
def pick_best(candidates: list[TrainParams], scores: list[float]) -> TrainParams:
    """The candidate with the best validation AUC (the first of equals: the search space's order)."""
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    print(f"tune: {len(candidates)} candidates, best valid auc {scores[best]:.4f}: {candidates[best]}", flush=True)
    return candidates[best]


@il.step(
    cache=il.Cache(version=fraud_model.MODEL_CODE_VERSION),
    resources=il.Resources(cpu="2", memory="4Gi", gpu=1, accelerator="nvidia-h200"),
    retry=il.Retry(transient=2, preempted=3, oom_remediation=True),  # spot: survive 3 reclaims
    checkpoint=il.CheckpointPolicy(every="1m", keep=2),
    interruptible=True,
    labels={"team": "fraud"},
)
def train(splits: il.Dataset, params: TrainParams, ctx: il.StepContext) -> il.Model:
    """Train the MLP (cuda if this process has it); checkpoint each epoch, resume on retry."""
    from interlock.plugins.mlflow import gpu_tags

    with ctx.waiting_for_data():  # the receipt, report and metrics show it beside GPU time
        pre = json.loads((splits / fraud_model.PREPROCESSING_FILE).read_text())
        train_df = pd.read_parquet(splits / "train.parquet")
        valid_df = pd.read_parquet(splits / "valid.parquet")

    def epoch_done(epoch: int, record: dict[str, float]) -> None:  # live progress and curves (report, MLflow)
        for name in ("loss", "valid_auc"):
            ctx.log_metric(name, record[name], step=epoch)
        ctx.progress(epoch, of=params.epochs, unit="epoch")
        ctx.log.info("epoch %d/%d: loss %.4f, valid auc %.4f", epoch, params.epochs, record["loss"], record["valid_auc"])

    model, history = fraud_model.fit(
        fraud_model.apply_preprocessing(train_df, pre), train_df[fraud_data.LABEL].to_numpy(),
        fraud_model.apply_preprocessing(valid_df, pre), valid_df[fraud_data.LABEL].to_numpy(),
        params,
        checkpoint=ctx.checkpoint,
        micro_batch=ctx.batch_size(params.batch_size),
        on_epoch_end=epoch_done,
    )
    device = fraud_model.pick_device()
    # What trained it, for the receipt (a tune run's winner is chosen at run time).
    ctx.record(device=device, precision="fp32", epochs=len(history), hidden=params.hidden, lr=params.lr)
    ctx.report_device(device)  # the receipt bills GPU-seconds from this, not from the request
    out = il.Model.new({
        "snapshot": splits.metadata.get("snapshot"),
        "valid_auc": history[-1]["valid_auc"],
        "device": device,
        "gpu": gpu_tags(precision="fp32"),  # GPU facts only when trained on one
    })
    fraud_model.save_model_dir(model, pre, params, out.path, example=valid_df, history=history, device=device)
    return out


@il.step(resources=il.Resources(cpu="1", memory="1Gi"))
def find_champion(registry: str) -> str:
    """The registry's champion version now ("none": there is none yet).

    Never cached: it is the one input of ``evaluate`` that lives outside the pipeline. A
    model version never changes once registered, so ``evaluate`` is cached on it: a rerun
    against the same champion scores nothing again.
    """
    return open_registry(registry).champion(MODEL_NAME) or "none"


@il.step(cache=il.Cache(version=fraud_model.MODEL_CODE_VERSION), resources=il.Resources(cpu="1", memory="2Gi"))
def evaluate(splits: il.Dataset, model: il.Model, registry: str, champion: str, ctx: il.StepContext) -> Evaluation:
    """Score the challenger and the ``champion`` version on the same held-out test split.

    Each model applies its *own* preprocessing (saved in its directory) to the raw rows.
    """
    meta = splits.metadata
    # The receipt names the data the metrics come from (a cache hit replays this).
    ctx.record_snapshot(meta["snapshot"], sha256=meta["sha256"], split="test", rows=meta["rows"]["test"])
    test = pd.read_parquet(splits / "test.parquet")
    challenger = il.Metrics(fraud_model.evaluate_model(*fraud_model.load_model_dir(model.path), test))
    if champion == "none":
        return Evaluation(challenger, il.Metrics(), "none")
    from .fraud_pyfunc import load_model_files

    reg = open_registry(registry)
    with tempfile.TemporaryDirectory(prefix="fraud-champion-") as tmp:
        path = reg.download(MODEL_NAME, champion, tmp)
        scored = il.Metrics(fraud_model.evaluate_model(*load_model_files(path), test))
    return Evaluation(challenger, scored, champion)


@il.step(resources=il.Resources(cpu="1", memory="1Gi"))
def register(
    model: il.Model,
    metrics: il.Metrics,
    snapshot: str,
    registry: str,
    params: TrainParams,
    margin: float,
    reason: str,
    champion_version: str,
    ctx: il.StepContext,
) -> str:
    """Log the run, register the model version with its receipt tags, move ``champion``.

    ``champion_version`` is the champion ``evaluate`` compared against ("none": there was
    none). The move is compare-and-set: if another run promoted meanwhile, nothing is
    promoted and the step fails FATAL (``ChampionMoved``), naming both versions: this
    model was never compared with the new champion, so re-run the pipeline.
    """
    from interlock.core.record.receipt import git_info

    git = git_info()
    receipt = {
        "pipeline": ctx.pipeline,
        "run_id": ctx.run_id,
        "backend": ctx.backend,
        "snapshot": snapshot,
        "git_sha": git.get("sha"),
        "git_dirty": git.get("dirty"),
        "image": os.environ.get("INTERLOCK_IMAGE") or "local-process",
        "gate": reason,
    }
    from interlock.plugins.mlflow import run_for_step

    from .fraud_pyfunc import register_model

    reg = open_registry(registry)
    # Refuse before logging anything when the champion already moved; promote re-checks
    # atomically (under the store's lock on SQLite).
    reg.check_champion(MODEL_NAME, champion_version)
    # The pipeline run's own MLflow run (found by its interlock.run_id tag, created when the
    # pipeline is not tracked): the model is logged there, as an MLflow pyfunc model.
    run_id = run_for_step(ctx, reg, EXPERIMENT)
    reg.log_metrics(run_id, dict(metrics))  # the registered model's test metrics (auc, precision_at_100)
    version = register_model(
        reg, MODEL_NAME, model.path, run_id=run_id, receipt=receipt, gpu=model.metadata.get("gpu") or {},
        tags={"auc": f"{metrics['auc']:.6f}", "device": model.metadata.get("device", ""),
              "interlock.compared_with": champion_version, "interlock.margin": margin,
              TRAIN_PARAMS_TAG: json.dumps(dataclasses.asdict(params), sort_keys=True)},
        expected_champion=champion_version,
    )
    previous = reg.promote(MODEL_NAME, version, expected_champion=champion_version)
    ctx.record(model_name=MODEL_NAME, model_version=version, previous_champion=previous, mlflow_run_id=run_id)
    print(f"registered {MODEL_NAME} version {version}; champion: {previous or 'none'} -> {version}", flush=True)
    return version


@il.pipeline(name="fraud-retrain", triggers=[WEEKLY_REFRESH])
def fraud_retrain(
    snapshot: str = "2026-11-01",
    margin: float = 0.01,
    registry: str = "",
    params: TrainParams | None = None,
    mode: Literal["refresh", "tune"] = "refresh",
):
    """Retrain the fraud model on a snapshot; promote it only if it beats the champion by `margin` AUC.

    ``mode``: ``refresh`` trains with ``params``, or when none are given with the champion's
    hyperparameters; ``tune`` searches around ``params`` (or the defaults) first.
    """
    raw = ingest(snapshot=snapshot)
    clean = validate(raw=raw)
    splits = transform(clean=clean, snapshot=snapshot)
    with il.when(mode == "tune"):
        candidates = search_space(params=params)
        scores = il.map(trial, over=candidates, splits=splits)
        tuned = pick_best(candidates=candidates, scores=scores)
    with il.otherwise():
        recorded = champion_params(registry=registry, params=params, after=splits)
    chosen = il.branch_value(tuned, recorded)
    model = train(splits=splits, params=chosen)
    # Asked once the model exists: training can take hours, and the champion may move meanwhile.
    champion = find_champion(registry=registry, after=model)
    scores = evaluate(splits=splits, model=model, registry=registry, champion=champion)
    decision = il.champion_gate(challenger=scores.challenger, champion=scores.champion, metric="auc", margin=margin)
    with il.when(decision.promote):
        register(
            model=model, metrics=scores.challenger, snapshot=snapshot, registry=registry, params=chosen,
            margin=margin, reason=decision.reason, champion_version=scores.champion_version,
        )
    return Summary(decision.promote, decision.reason, scores.challenger, scores.champion, scores.champion_version)


# One MLflow run per pipeline run, in the store the ``registry`` parameter names.
track(fraud_retrain, experiment=EXPERIMENT, store_param="registry")
