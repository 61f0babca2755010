"""Pipelines for the deployment form's tests (Airflow retries by cause)."""

from __future__ import annotations

from pathlib import Path

import interlock as il

SOON = il.Backoff(attempts=2, first="1s", max_delay="2s", max_total="10s")


@il.step(retry=il.Retry(contention=SOON))
def wait_for_gpus(counter: str) -> int:
    path = Path(counter)
    tries = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(tries))
    if tries == 1:
        raise RuntimeError("0/3 nodes are available: 3 Insufficient nvidia.com/gpu")
    return tries


@il.step(retry=il.Retry(transient=1, contention=SOON))
def bad_config(counter: str) -> int:
    path = Path(counter)
    path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))
    raise ValueError("bad config: learning rate must be positive")


@il.pipeline(name="af-contended")
def contended(counter: str = "/nonexistent"):
    return wait_for_gpus(counter=counter)


@il.pipeline(name="af-fatal")
def fatal(counter: str = "/nonexistent"):
    return bad_config(counter=counter)
