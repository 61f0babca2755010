"""Pipelines the CLI tests run by file path: ``.../cli_demo.py:greet``."""

from __future__ import annotations

import interlock as il


@il.step
def repeat(name: str, times: int) -> str:
    return " ".join([name] * times)


@il.step(cache=il.Cache())
def style(text: str, loud: bool = False) -> str:
    return text.upper() if loud else text


@il.step
def explode(text: str) -> str:
    raise il.ValidationFailed(f"refusing {text!r}", hint="pass a friendlier name")


@il.pipeline
def greet(name: str = "world", times: int = 2, loud: bool = False):
    return style(text=repeat(name=name, times=times), loud=loud)


@il.pipeline(name="greet-badly")
def greet_badly(name: str = "world"):
    return explode(text=repeat(name=name, times=1))
