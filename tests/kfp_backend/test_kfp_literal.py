"""node_task.python_literal: the exact text compiled into every component (the IR must not
change with how it is built), and it reads back as the same data."""

from __future__ import annotations

import ast
import math

import pytest

from interlock.adapters.kfp.node_task import python_literal

SAMPLE = {"b": [1, 2.5, None, True, False, "it's \"q\"", (3, 4), []], "a": {"z": {}, "y": -0.0, "x": 10**20},
          "é": "\n"}


def test_exact_text() -> None:
    assert python_literal(SAMPLE) == (
        "{'a':{'x':100000000000000000000,'y':-0.0,'z':{}},"
        "'b':[1,2.5,None,True,False,'it\\'s \"q\"',[3,4],[]],'é':'\\n'}"
    )
    assert python_literal([float("inf"), -float("inf")]) == "[float('inf'),float('-inf')]"
    assert python_literal(float("nan")) == "float('nan')"


def test_reads_back() -> None:
    back = ast.literal_eval(python_literal(SAMPLE))
    assert back == {**SAMPLE, "b": [1, 2.5, None, True, False, "it's \"q\"", [3, 4], []]}
    assert math.isinf(eval(python_literal(float("inf")), {"float": float}))  # noqa: S307


def test_subclasses_as_their_base() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    assert python_literal({"k": Name("v"), "n": Count(3)}) == "{'k':'v','n':3}"


@pytest.mark.parametrize("bad", [object(), {"a": {1, 2}}, b"bytes"])
def test_refuses_what_is_not_json(bad: object) -> None:
    with pytest.raises(TypeError, match="not JSON data"):
        python_literal(bad)
