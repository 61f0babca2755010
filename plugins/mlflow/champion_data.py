"""The ``interlock.registries`` plugin ``mlflow``: which data trained a model's champion.

``il.OnDrift(model="fraud-detector", registry=STORE)`` compares new data with it. A version
registered with its run's receipt (``MlflowRegistry.register(receipt=...)``) carries the
snapshot as the tag ``interlock.snapshot``; that is the training data, as a path or URI.
"""

from __future__ import annotations

from interlock.core.base.errors import WatchError

from .tags import TAG_PREFIX
from .tracker import registry_at

SNAPSHOT_TAG = f"{TAG_PREFIX}snapshot"


class MlflowChampionData:
    def training_data(self, model: str, store: str) -> str | None:
        """The ``interlock.snapshot`` tag of ``model``'s champion in ``store`` (a tracking URI
        or a store folder; empty: ``$MLFLOW_TRACKING_URI``, else ./.interlock/mlflow)."""
        reg = registry_at(store)
        version = reg.champion(model)
        if version is None:
            return None
        snapshot = reg.describe(model, version).tags.get(SNAPSHOT_TAG)
        if not snapshot:
            raise WatchError(
                f"the champion of {model!r} (version {version}, {reg.tracking_uri}) has no {SNAPSHOT_TAG} tag: "
                "which data trained it is unknown",
                hint="register versions with their run's receipt (MlflowRegistry.register(receipt=...)), "
                "whose snapshot is the training data's URI",
            )
        return str(snapshot)
