"""Pipelines named as Airflow DAG ids and Flyte workflows are (underscores, capitals), ported
from Airflow's ``example_branch_operator``: a branch on a parameter and a join after it."""

from __future__ import annotations

import interlock as il


@il.step
def choose(pick: str) -> str:
    return pick


@il.step
def branch_a() -> str:
    return "a"


@il.step
def branch_b() -> str:
    return "b"


@il.step
def join(chosen: str) -> str:
    return f"joined:{chosen}"


@il.pipeline(name="example_branch_operator")
def example_branch_operator(pick: str = "a") -> str:
    chosen = choose(pick=pick)
    with il.when(chosen == "a"):
        a = branch_a()
    with il.otherwise():
        b = branch_b()
    return join(chosen=il.branch_value(a, b))


@il.pipeline(name="Fraud_Retrain_v2")
def capitalised(pick: str = "b") -> str:
    return join(chosen=choose(pick=pick))
