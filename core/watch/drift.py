"""Drift, as ``il.OnDrift`` needs it: a statistic and "the champion's training data".

Both are plugins, found through entry points, so that core needs neither scipy nor MLflow:

- a ``DriftStatistic`` (group ``interlock.drift``; ``interlock[drift]`` ships PSI and KS)
  compares the reference table with the current one, per feature;
- a ``ChampionData`` (group ``interlock.registries``; ``interlock[mlflow]`` ships one) says
  which data trained the champion of a model: the snapshot URI its registered version carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from interlock.core.base import plugins
from interlock.core.base.errors import WatchError


@dataclass(frozen=True)
class DriftResult:
    """Per feature, the statistic and its figure (``{"amount": {"psi": 0.31}}``), and whether
    any figure reached its threshold."""

    drifted: bool
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    reference: str = ""  # the champion's training data
    current: str = ""  # the newest data

    def crossed(self) -> list[str]:
        """The features whose figure reached the threshold, as ``amount psi=0.31``."""
        return [f"{name} {k}={v:.3g}" for name, stats in self.figures.items() for k, v in stats.items()
                if k in ("psi", "ks") and stats.get(f"{k}_crossed")]

    def figures_only(self) -> dict[str, dict[str, float]]:
        """The figures without the crossed flags (what a run's ``figures_input`` gets)."""
        return {name: {k: v for k, v in stats.items() if not k.endswith("_crossed")} for name, stats in self.figures.items()}


@runtime_checkable
class DriftStatistic(Protocol):
    def compare(self, reference: str, current: str, *, features: tuple[str, ...] | None, psi: float,
                ks: float) -> DriftResult:
        """Compare the tables at ``reference`` and ``current`` (URIs or paths) per feature."""
        ...


@runtime_checkable
class ChampionData(Protocol):
    def training_data(self, model: str, store: str) -> str | None:
        """The URI of the data the champion of ``model`` was trained on (None: no champion
        yet); ``store`` is the trigger's ``registry`` (empty: the registry's default)."""
        ...


def _one(group: plugins.PluginGroup, preferred: str) -> str:
    found = plugins.installed(group)
    if preferred in found or not found:
        return preferred  # load() says what is missing
    return next(iter(found))


def drift_statistic(name: str = "drift") -> DriftStatistic:
    found: DriftStatistic = plugins.create(plugins.DRIFT, _one(plugins.DRIFT, name), DriftStatistic, "DriftStatistic")
    return found


def champion_data(name: str = "mlflow") -> ChampionData:
    found: ChampionData = plugins.create(plugins.REGISTRIES, _one(plugins.REGISTRIES, name), ChampionData, "ChampionData")
    return found


def evaluate_drift(trig: Any, current: str, label: str) -> DriftResult | str:
    """The drift of ``current`` against the champion's training data, or why there is none to
    measure (no champion yet). Plugin failures are a ``WatchError`` naming the trigger."""
    try:
        reference = champion_data().training_data(trig.model, trig.registry)
    except WatchError:
        raise
    except Exception as exc:
        raise WatchError(f"trigger {label!r}: cannot read the champion of {trig.model!r}: {type(exc).__name__}: {exc}") from exc
    if reference is None:
        return f"no champion of {trig.model!r} yet: nothing to compare with"
    try:
        return drift_statistic().compare(reference, current, features=trig.features, psi=trig.psi, ks=trig.ks)
    except WatchError:
        raise
    except Exception as exc:
        raise WatchError(
            f"trigger {label!r}: cannot compare {current} with the champion's training data {reference}: "
            f"{type(exc).__name__}: {exc}",
            hint="both must be tables (parquet or csv) with the features as columns",
        ) from exc
