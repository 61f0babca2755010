"""Small pipelines with triggers for the watch tests (importable by name: kfp-local's tasks
import their steps by module)."""

from __future__ import annotations

import interlock as il


@il.step
def note(at: str, snapshot: str) -> str:
    return f"{at}|{snapshot}"


@il.pipeline(name="nightly", triggers=[il.Cron("0 3 * * *", tz="Europe/Berlin", time_input="at", name="nightly")])
def nightly(at: str = "", snapshot: str = "none"):
    return note(at=at, snapshot=snapshot)


@il.pipeline(name="hourly", triggers=[il.Cron("0 * * * *", tz="Europe/Berlin", time_input="at", catch_up=True)])
def hourly(at: str = "", snapshot: str = "none"):
    return note(at=at, snapshot=snapshot)


@il.pipeline(name="sixhourly", triggers=[il.Every("6h", time_input="at")])
def sixhourly(at: str = "", snapshot: str = "none"):
    return note(at=at, snapshot=snapshot)


def landed_body(at: str = "", snapshot: str = "none"):  # type: ignore[no-untyped-def]
    """The body of a data-triggered pipeline, for tests that declare their own trigger."""
    return note(at=at, snapshot=snapshot)


def on_data(uri: str, name: str = "landed") -> il.Pipeline:
    """A pipeline that runs once per object landing under ``uri``, its URI as ``snapshot``."""

    @il.pipeline(name=name, triggers=[il.OnData(uri, pattern="*.parquet", uri_input="snapshot", name="landed")])
    def landed(at: str = "", snapshot: str = "none"):
        return note(at=at, snapshot=snapshot)

    return landed


@il.step
def measure(snapshot: str, mode: str, figures: dict) -> float:
    return float(len(figures)) + (1.0 if mode == "tune" else 0.0)


@il.pipeline(name="tracked-watch", triggers=[il.Cron("0 3 * * *", tz="Europe/Berlin", time_input="at", name="nightly")])
def tracked_watch(at: str = "", snapshot: str = "none", store: str = ""):
    return note(at=at, snapshot=snapshot)


def on_drift(uri: str, registry: str, model: str = "fraud-detector") -> il.Pipeline:
    """A retraining pipeline in miniature: drift on ``uri`` against the champion of ``model``
    starts a ``tune`` run with the newest data and the figures."""

    @il.pipeline(name="drift-watch", triggers=[il.OnDrift(
        uri, model=model, registry=registry, pattern="*.parquet", uri_input="snapshot", figures_input="figures",
        features=("amount", "merchant_category", "hour", "country", "card_age_days", "tx_last_24h", "is_foreign"),
        inputs={"mode": "tune"}, name="drift")])
    def drift_watch(snapshot: str = "none", mode: str = "refresh", figures: dict = {}):  # noqa: B006 - a default, never mutated
        return measure(snapshot=snapshot, mode=mode, figures=figures)

    return drift_watch


def _tracked() -> None:
    from interlock.plugins.mlflow.tracker import track

    track(tracked_watch, experiment="tracked-watch", store_param="store")


_tracked()


@il.pipeline(name="measure-only")
def measure_only(snapshot: str = "x"):
    return note(at="", snapshot=snapshot)
