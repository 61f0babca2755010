"""Port of Flyte's sub-workflows example (flytesnacks
``examples/advanced_composition/advanced_composition/subworkflow.py``): a task ``t1`` that returns
an int and a str, a sub-workflow ``my_subwf`` that calls it twice, ``parent_wf`` that calls the
sub-workflow, and ``nested_parent_wf`` that calls both (a sub-workflow two deep).

    python docs/examples/flyte_subworkflows.py      # runs on local, flyte-local and kfp-local
"""

from __future__ import annotations

from typing import NamedTuple

import interlock as il


class T1Out(NamedTuple):
    t1_int_output: int
    c: str


@il.step
def t1(a: int) -> T1Out:
    return T1Out(a + 2, "world")


@il.pipeline(name="my-subwf")
def my_subwf(a: int = 42):
    x, y = t1(a=a)
    u, v = t1(a=x)  # the second call of t1 is node t1-2
    return y, v


@il.pipeline(name="parent-wf")
def parent_wf(a: int = 1):
    x, y = t1(a=a)
    u, v = my_subwf(a=x)
    return x, u, v


@il.pipeline(name="nested-parent-wf")
def nested_parent_wf(a: int = 3):
    x, y = my_subwf(a=a)
    m, n, o = parent_wf(a=a)
    return m, n, o, x


if __name__ == "__main__":
    # Import this file as a module: kfp-local's components import the pipeline by module name.
    import flyte_subworkflows as example
    from _compare import same_everywhere

    print(same_everywhere(example.parent_wf, a=1))
    print(same_everywhere(example.nested_parent_wf, a=3))
