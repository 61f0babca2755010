"""A pipeline with Optional parameters, for `-p key=null` on the command line."""

from __future__ import annotations

import interlock as il


@il.step
def describe(limit: int | None = None, tag: str | None = "t") -> str:
    return f"limit={limit} tag={tag}"


@il.pipeline(name="optional-params")
def optional_params(limit: int | None = 3, tag: str | None = "t"):
    return describe(limit=limit, tag=tag)
