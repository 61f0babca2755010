"""ctx.log_metric / ctx.progress: points land in the run's state, one JSON line each."""

import json

import pytest

import interlock as il
from interlock.core.run.metrics import MetricLog, add_listener, read_points


@il.step
def fit(ctx: il.StepContext, epochs: int) -> float:
    loss = 1.0
    for epoch in range(epochs):
        loss /= 2
        ctx.log_metric("loss", loss, step=epoch)
        ctx.progress(epoch + 1, of=epochs, unit="epoch")
    return loss


@il.pipeline
def curves(epochs: int = 3) -> float:
    return fit(epochs=epochs)


def test_points_are_recorded_in_the_run_state(tmp_path):
    il.run(curves, epochs=3, workdir=tmp_path)
    files = list(tmp_path.rglob("metrics/fit.jsonl"))
    assert len(files) == 1, files
    points = list(read_points(files[0].parent.parent, "fit"))
    losses = [(p.step, p.value) for p in points if p.kind == "metric"]
    assert losses == [(0, 0.5), (1, 0.25), (2, 0.125)]
    progress = [(p.name, p.value, p.of) for p in points if p.kind == "progress"]
    assert progress == [("epoch", 1.0, 3.0), ("epoch", 2.0, 3.0), ("epoch", 3.0, 3.0)]


def test_a_direct_call_keeps_points_in_memory_and_listeners_see_them():
    seen = []
    remove = add_listener(seen.append)
    try:
        ctx = il.StepContext.local("fit")
        assert fit(ctx=ctx, epochs=2) == 0.25
    finally:
        remove()
    assert [p.value for p in ctx.metrics.points if p.kind == "metric"] == [0.5, 0.25]
    assert [p.name for p in seen] == ["loss", "epoch", "loss", "epoch"]


def test_a_torn_last_line_is_skipped(tmp_path):
    log = MetricLog("s", tmp_path / "metrics" / "s.jsonl")
    log.log("acc", 0.9, step=1)
    with open(tmp_path / "metrics" / "s.jsonl", "a") as f:
        f.write('{"node":"s","name":"acc","val')
    assert [(p.name, p.value) for p in read_points(tmp_path)] == [("acc", 0.9)]
    assert json.loads((tmp_path / "metrics" / "s.jsonl").read_text().splitlines()[0])["step"] == 1


def test_a_non_number_names_the_step_and_metric():
    log = MetricLog("train")
    with pytest.raises(TypeError, match="step 'train': metric 'loss' must be a number"):
        log.log("loss", "high")
