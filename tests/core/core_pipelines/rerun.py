"""Pipelines for reused run ids and resume: counted calls, Dataset outputs whose files change
with the parameters, a step that fails while a flag file exists, and a step that blocks."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import interlock as il


def _count(calls: str, name: str) -> None:
    Path(calls).mkdir(parents=True, exist_ok=True)
    with (Path(calls) / name).open("a") as fh:
        fh.write("x")


def calls_of(calls: str | Path, name: str) -> int:
    path = Path(calls) / name
    return len(path.read_text()) if path.exists() else 0


@il.step
def files(names: list[str], calls: str) -> il.Dataset:
    _count(calls, "files")
    ds = il.Dataset.new({"names": names})
    for n in names:
        (ds / n).write_text(n)
    return ds


@il.step
def listing(ds: il.Dataset) -> list[str]:
    return sorted(p.name for p in ds.path.iterdir() if not p.name.startswith("."))


@il.pipeline(name="dataset-files")
def dataset_files(names: list[str], calls: str):
    return listing(ds=files(names=names, calls=calls))


@il.step(cache=il.Cache())
def cached_files(names: list[str]) -> il.Dataset:
    ds = il.Dataset.new()
    for n in names:
        (ds / n).write_text(n)
    return ds


@il.pipeline(name="cached-files")
def cached_dataset_files(names: list[str]):
    return listing(ds=cached_files(names=names))


@il.step
def maybe(present: bool) -> il.Dataset | None:
    if not present:
        return None
    ds = il.Dataset.new()
    (ds / "data.txt").write_text("new data")
    return ds


@il.step
def describe(ds: il.Dataset | None) -> str:
    return "none" if ds is None else (ds / "data.txt").read_text()


@il.pipeline(name="maybe-dataset")
def maybe_dataset(present: bool):
    return describe(ds=maybe(present=present))


@il.step
def prepare(n: int, calls: str) -> int:
    _count(calls, "prepare")
    return n * 10


@il.step(checkpoint=il.CheckpointPolicy(every="1s", keep=2))
def train(x: int, broken_flag: str, calls: str, ctx: il.StepContext) -> int:
    _count(calls, "train")
    state = ctx.checkpoint.load() or {"epoch": 0, "resumed_from": None}
    resumed_from = state["epoch"] if state["epoch"] else None
    for epoch in range(state["epoch"] + 1, 4):
        ctx.checkpoint.save({"epoch": epoch, "resumed_from": resumed_from})
        if epoch == 2 and Path(broken_flag).exists():
            raise ValueError("bad learning-rate schedule")  # a bug: FATAL
    return x + (resumed_from or 0)


@il.step
def report(score: int, calls: str) -> str:
    _count(calls, "report")
    return f"score={score}"


@il.pipeline(name="resumable")
def resumable(broken_flag: str, calls: str, n: int = 1):
    x = prepare(n=n, calls=calls)
    return report(score=train(x=x, broken_flag=broken_flag, calls=calls), calls=calls)


@il.step(retry=il.Retry(transient=1))
def flaky(calls: str) -> int:
    _count(calls, "flaky")
    raise ConnectionResetError(104, "Connection reset by peer")


@il.pipeline(name="always-flaky")
def always_flaky(calls: str):
    return flaky(calls=calls)


@il.step
def wait_for(go: str, value: int) -> int:
    deadline = time.monotonic() + 30
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return value


@il.pipeline(name="blocking")
def blocking(go: str, value: int):
    return wait_for(go=go, value=value)


@il.step
def use_token(api_token: str, value: int) -> int:
    return value + len(api_token)


@il.pipeline(name="secretive")
def secretive(api_token: str, value: int = 1):
    return use_token(api_token=api_token, value=value)


@il.step(checkpoint=il.CheckpointPolicy(every="1s", keep=2))
def long_train(x: int, calls: str, ctx: il.StepContext) -> str:
    _count(calls, "long_train")
    state = ctx.checkpoint.load() or {"epoch": 0}
    started_at = state["epoch"]
    for epoch in range(state["epoch"] + 1, 6):
        ctx.checkpoint.save({"epoch": epoch})
        Path(calls, f"epoch-{epoch}").write_text("")
        if started_at == 0 and epoch >= 2:
            time.sleep(60)  # the first attempt is killed here
    return f"x={x} started_at={started_at}"


@il.pipeline(name="killable")
def killable(calls: str, n: int = 1):
    return long_train(x=prepare(n=n, calls=calls), calls=calls)


@dataclasses.dataclass
class Config:
    lr: float = 0.1
    layers: int = 2


@il.step
def describe_config(cfg: Config) -> str:
    return f"lr={cfg.lr} layers={cfg.layers}"


@il.pipeline(name="configured")
def configured(cfg: Config = Config()):  # noqa: B008 - a default config object, as teams write it
    return describe_config(cfg=cfg)
