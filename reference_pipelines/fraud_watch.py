"""fraud-retrain with every kind of trigger, for ``interlock watch`` (docs/triggers.md).

    interlock watch reference_pipelines/fraud_watch.py:fraud_watch            # runs them here, on local
    interlock triggers check reference_pipelines/fraud_watch.py:fraud_watch   # what would start now, and why

The same pipeline as fraud_retrain.py (the same steps, name, MLflow experiment and registry),
started by itself:

- ``weekly-refresh``: fraud_retrain's own (Mondays 03:00 UTC), a ``refresh`` run (the
  champion's recorded hyperparameters) on the default snapshot, so that the model never goes stale;
- ``new-snapshot``: a labelled snapshot landing in ``<root>/labelled/`` (a parquet file, see
  ``fraud_data.write_snapshot``) starts a ``refresh`` run on it (its path is ``snapshot``);
- ``drift``: when the newest data in ``<root>/live/`` has drifted from the data the champion
  was trained on (PSI >= 0.2 or KS >= 0.1 on a feature; the champion's ``interlock.snapshot``
  tag names that data), a ``tune`` run on it: a hyperparameter search, then the same gate.

``<root>`` is ``$FRAUD_WATCH_DIR``, else ``.interlock/fraud-data`` under the directory the watcher
starts in. The drift trigger reads the champion from the store the runs register in by default
(``$MLFLOW_TRACKING_URI``, else ``.interlock/mlflow``); ``watch_pipeline(root, registry=...)``
names another. The compile backends cannot all render data and drift triggers (each refuses
what it cannot hold at compile), so fraud_retrain.py itself keeps only the weekly refresh,
which every backend renders.
"""

from __future__ import annotations

import os
from pathlib import Path

import interlock as il

from . import fraud_retrain as base

ROOT = Path(os.environ.get("FRAUD_WATCH_DIR") or Path(".interlock") / "fraud-data")
FEATURES = ("amount", "merchant_category", "hour", "country", "card_age_days", "tx_last_24h", "is_foreign")

def watch_pipeline(root: Path = ROOT, registry: str = "") -> il.Pipeline:
    """fraud-retrain with the three triggers on the folders under ``root``; ``registry``: the
    MLflow store the drift trigger reads the champion from (pass the runs' ``-p registry=``)."""
    triggers = [
        base.WEEKLY_REFRESH,
        il.OnData(str(root / "labelled"), pattern="*.parquet", uri_input="snapshot", name="new-snapshot"),
        il.OnDrift(str(root / "live"), model=base.MODEL_NAME, registry=registry, pattern="*.parquet", features=FEATURES,
                   uri_input="snapshot", inputs={"mode": "tune"}, name="drift"),
    ]
    # The same body, so the same steps and the same name: one MLflow experiment, one registry.
    built: il.Pipeline = il.pipeline(name="fraud-retrain", triggers=triggers)(base.fraud_retrain.fn)
    return built


fraud_watch = watch_pipeline()
