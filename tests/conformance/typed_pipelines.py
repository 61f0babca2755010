"""Parameter and value types Flyte 2 and Airflow users pass (issue 31 item 9): an Enum (str
and int valued), a Literal, a pydantic model as a parameter and as a step's output. Each step
asserts it got the declared type, whatever form the backend carried the value in."""

from __future__ import annotations

import enum
from typing import Literal

import pydantic

import interlock as il


class Color(str, enum.Enum):  # noqa: UP042 - the mixin form ported examples write
    RED = "red"
    BLUE = "blue"


class Size(enum.Enum):
    S = 1
    L = 3


class Cfg(pydantic.BaseModel):
    lr: float = 0.1
    layers: int = 2
    name: str = "m"


Mode = Literal["fast", "slow"]
DEFAULT_CFG = Cfg()


@il.step
def paint(color: Color, size: Size, mode: Mode, cfg: Cfg) -> Color:
    assert isinstance(color, Color) and isinstance(size, Size) and isinstance(cfg, Cfg), (color, size, cfg)
    return Color.BLUE if mode == "slow" else color


@il.step
def tune(cfg: Cfg, size: Size) -> Cfg:
    assert isinstance(cfg, Cfg), type(cfg)
    return Cfg(lr=cfg.lr * 2, layers=cfg.layers + size.value, name=cfg.name)


@il.step
def describe(c: Color, cfg: Cfg, mode: str) -> str:
    assert isinstance(c, Color) and isinstance(cfg, Cfg), (type(c), type(cfg))
    return f"{c.value}:{mode}:{cfg.layers}:{cfg.lr}:{cfg.name}"


@il.pipeline(name="typed-params")
def typed_params(color: Color = Color.RED, size: Size = Size.L, mode: Mode = "fast", cfg: Cfg = DEFAULT_CFG) -> str:
    c = paint(color=color, size=size, mode=mode, cfg=cfg)
    return describe(c=c, cfg=tune(cfg=cfg, size=size), mode=mode)
