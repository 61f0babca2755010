"""A pipeline whose receipt has something in every field: snapshots, a cached step, a retried
GPU step with an image digest, and parameters that must be redacted."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import interlock as il

DIGEST = "sha256:" + "ab" * 32


@il.step
def load(snapshot: str, ctx: il.StepContext) -> int:
    ctx.record_snapshot(snapshot, uri=f"s3://lake/events/{snapshot}", rows=3)
    return 3


@il.step(cache=il.Cache())
def featurize(rows: int) -> int:
    return rows * 2


@il.step(
    retry=il.Retry(transient=1),
    resources=il.Resources(cpu="2", memory="1Gi", gpu=1, accelerator="nvidia-h200"),
    image=f"ghcr.io/team/train@{DIGEST}",
    labels={"team": "fraud", "cost-center": "ml-42"},
)
def train(features: int, flaky_marker: str, ctx: il.StepContext) -> float:
    time.sleep(0.05)
    marker = Path(flaky_marker)
    if not marker.exists():  # fail once, the first time a run gets here
        marker.write_text("failed once")
        raise ConnectionResetError("connection reset by peer")
    ctx.record(precision="bf16")
    ctx.report_device("cuda:0")  # as `torch.device("cuda", 0)` would: the receipt bills 1 GPU
    return features / 10


@il.step
def reject(x: float) -> float:
    raise il.ValidationFailed(f"score {x} out of range", hint="check the feature pipeline")


@il.step
def publish(x: float) -> str:
    return f"published {x}"


@il.pipeline(name="receipt-demo")
def receipt_demo(
    flaky_marker: str,
    snapshot: str = "snap-2026-11-01",
    api_token: str = "hunter2-very-secret",
    db_url: str = "postgresql://trainer:pa55word@db.internal:5432/features",
):
    rows = load(snapshot=snapshot)
    return train(features=featurize(rows=rows), flaky_marker=flaky_marker)


@il.pipeline(name="receipt-failing")
def receipt_failing(x: float = 1.5):
    return publish(x=reject(x=x))


@dataclasses.dataclass
class Connection:
    host: str = "db.internal"
    password: str = "field-secret-42"
    dsn: str = "postgresql://etl:dsn-secret-7@db.internal/features"
    retries: int = 3


@il.step
def connect(conn: Connection) -> str:
    return f"{conn.host}:{conn.retries}"


@il.pipeline(name="receipt-config")
def receipt_config(conn: Connection = Connection()):  # noqa: B008 - a frozen default, recorded as JSON
    return connect(conn=conn)


@il.step(resources=il.Resources(gpu=2, accelerator="nvidia-h200"))
def cpu_fallback(x: int, ctx: il.StepContext) -> int:
    time.sleep(0.05)
    ctx.report_device("cpu")  # no CUDA here: trained on the CPU
    return x


@il.step(resources=il.Resources(gpu=1, accelerator="nvidia-h200"))
def silent_gpu_step(x: int) -> int:
    time.sleep(0.05)
    return x


@il.pipeline(name="billing")
def billing(x: int = 1):
    return silent_gpu_step(x=cpu_fallback(x=x))
