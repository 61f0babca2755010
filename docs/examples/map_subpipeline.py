"""A loop whose body is several steps and a condition: each trial trains, scores, and only a
trial that scores above the bar is kept; the kept ones are gathered after the loop.

Original (KFP v2): a ``ParallelFor`` around a block of tasks with a ``dsl.If`` inside, its
outputs gathered with ``dsl.Collected`` (the most common ParallelFor shape of the samples)::

    @dsl.pipeline
    def sweep(lrs: list = [0.1, 0.5, 1.0], bar: float = 0.4) -> str:
        with dsl.ParallelFor(lrs, parallelism=2) as lr:
            model = train(lr=lr)
            score = evaluate(model=model.output)
            with dsl.If(score.output > bar):
                kept = keep(model=model.output, score=score.output)
            with dsl.Else():
                dropped = drop(model=model.output)
            verdict = dsl.OneOf(kept.output, dropped.output)
        return summarize(verdicts=dsl.Collected(verdict)).output

Original (Flyte): a map over a sub-workflow, written as a ``@dynamic`` that calls it per item::

    @workflow
    def trial(lr: float, bar: float) -> str:
        model = train(lr=lr)
        score = evaluate(model=model)
        return conditional("keep").if_(score > bar).then(keep(model=model, score=score)).else_().then(drop(model=model))

    @dynamic
    def trials(lrs: list[float], bar: float) -> list[str]:
        return [trial(lr=lr, bar=bar) for lr in lrs]

    @workflow
    def sweep(lrs: list[float] = [0.1, 0.5, 1.0], bar: float = 0.4) -> str:
        return summarize(verdicts=trials(lrs=lrs, bar=bar))

    python -m docs.examples.map_subpipeline          # runs on local and flyte2-local
"""

import interlock as il


@il.step
def train(lr: float) -> float:
    return round(lr * 0.8, 6)  # the "model": a weight


@il.step
def evaluate(model: float) -> float:
    return round(model, 6)


@il.step
def keep(model: float, score: float) -> str:
    return f"kept {model:g} ({score:g})"


@il.step
def drop(model: float) -> str:
    return f"dropped {model:g}"


@il.step
def summarize(verdicts: list[str]) -> str:
    return "; ".join(verdicts)


@il.pipeline(name="ex-trial")
def trial(lr: float, bar: float) -> str:
    model = train(lr=lr)
    score = evaluate(model=model)
    with il.when(score > bar):
        kept = keep(model=model, score=score)
    with il.otherwise():
        dropped = drop(model=model)
    return il.branch_value(kept, dropped)


@il.pipeline(name="ex-map-subpipeline")
def sweep(lrs: list[float] = [0.1, 0.5, 1.0], bar: float = 0.4):  # noqa: B006
    verdicts = il.map(trial, over=lrs, bar=bar, concurrency=2)  # list[str], one per lr
    return summarize(verdicts=verdicts)


EXPECTED = {"o0": "dropped 0.08; dropped 0.4; kept 0.8 (0.8)"}

if __name__ == "__main__":
    for backend in ("local", "flyte2-local"):
        print(backend, il.run(sweep, backend=backend).outputs)
