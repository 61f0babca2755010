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


def on_data(uri: str, name: str = "landed") -> il.Pipeline:
    """A pipeline that runs once per object landing under ``uri``, its URI as ``snapshot``."""

    @il.pipeline(name=name, triggers=[il.OnData(uri, pattern="*.parquet", uri_input="snapshot", name="landed")])
    def landed(at: str = "", snapshot: str = "none"):
        return note(at=at, snapshot=snapshot)

    return landed
