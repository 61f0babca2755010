"""MLflow tracking and model registry (aliases, never stages) for interlock pipelines.

Importing this package does not import ``mlflow``; that happens on first use.

    track(fraud_retrain, experiment="fraud-retrain", store_param="registry")  # one MLflow run per run

    reg = MlflowRegistry(tracking_dir="/data/mlflow")      # sqlite:///data/mlflow/mlflow.db
    run_id = reg.log_run("fraud-retrain", params=..., metrics=..., receipt=receipt)
    current = reg.champion("fraud-detector")                # None before the first promotion
    v = reg.register("fraud-detector", model_dir, run_id=run_id, receipt=receipt, gpu=gpu_tags())
    v = reg.register_pyfunc("fraud-detector", MyPyfunc(), artifacts={"model": model_dir},
                            input_example=rows, run_id=run_for_step(ctx, reg, "fraud-retrain"))
    reg.promote("fraud-detector", v, expected_champion=current)  # returns the replaced champion

``expected_champion`` makes the promotion compare-and-set: it raises ``ChampionMoved``
(nothing moves) when another run promoted since ``current`` was read.

The module-level functions do the same on a registry built from ``tracking_dir`` /
``tracking_uri`` keywords.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .registry import (
    CHALLENGER,
    CHAMPION,
    PREVIOUS_CHAMPION,
    UNCHECKED,
    ChampionMoved,
    MlflowRegistry,
    ModelRegistry,
    ModelVersionInfo,
)
from .store import MlflowError, RegistryError, resolve_store
from .tags import describe_device, filter_secrets, gpu_tags, is_secret, receipt_tags, redact
from .tracker import MlflowTracker, find_run, pipeline_run, registry_at, run_for_step, track

_Dir = str | os.PathLike[str] | None


def log_run(
    experiment: str,
    *,
    params: Mapping[str, Any] | None = None,
    metrics: Mapping[str, float] | None = None,
    receipt: Mapping[str, Any] | None = None,
    artifacts: Mapping[str, Any] | None = None,
    run_name: str | None = None,
    tags: Mapping[str, Any] | None = None,
    tracking_dir: _Dir = None,
    tracking_uri: str | None = None,
) -> str:
    """``MlflowRegistry(tracking_dir, tracking_uri).log_run(...)``."""
    return MlflowRegistry(tracking_dir, tracking_uri).log_run(
        experiment,
        params=params,
        metrics=metrics,
        receipt=receipt,
        artifacts=artifacts,
        run_name=run_name,
        tags=tags,
    )


def register(
    model_name: str,
    source: Any,
    *,
    run_id: str | None = None,
    tags: Mapping[str, Any] | None = None,
    receipt: Mapping[str, Any] | None = None,
    gpu: Mapping[str, Any] | None = None,
    expected_champion: Any = UNCHECKED,
    tracking_dir: _Dir = None,
    tracking_uri: str | None = None,
) -> str:
    """``MlflowRegistry(tracking_dir, tracking_uri).register(...)``."""
    return MlflowRegistry(tracking_dir, tracking_uri).register(
        model_name,
        source,
        run_id=run_id,
        tags=tags,
        receipt=receipt,
        gpu=gpu,
        expected_champion=expected_champion,
    )


def champion(
    model_name: str, *, tracking_dir: _Dir = None, tracking_uri: str | None = None
) -> str | None:
    return MlflowRegistry(tracking_dir, tracking_uri).champion(model_name)


def promote(
    model_name: str,
    version: str | int,
    *,
    expected_champion: Any = UNCHECKED,
    tracking_dir: _Dir = None,
    tracking_uri: str | None = None,
) -> str | None:
    return MlflowRegistry(tracking_dir, tracking_uri).promote(
        model_name, version, expected_champion=expected_champion
    )


def set_challenger(
    model_name: str,
    version: str | int,
    *,
    tracking_dir: _Dir = None,
    tracking_uri: str | None = None,
) -> None:
    MlflowRegistry(tracking_dir, tracking_uri).set_challenger(model_name, version)


__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "PREVIOUS_CHAMPION",
    "UNCHECKED",
    "ChampionMoved",
    "MlflowError",
    "MlflowRegistry",
    "MlflowTracker",
    "ModelRegistry",
    "ModelVersionInfo",
    "RegistryError",
    "champion",
    "describe_device",
    "filter_secrets",
    "find_run",
    "gpu_tags",
    "is_secret",
    "log_run",
    "pipeline_run",
    "promote",
    "receipt_tags",
    "redact",
    "register",
    "registry_at",
    "resolve_store",
    "run_for_step",
    "set_challenger",
    "track",
]
