"""The backends the tests run on: the installed entry points and what each one's capabilities say.

Every list of backends a test is parametrised over comes from here, so a backend whose
capabilities say it can ``run`` joins the conformance suite with no test edited. What one
backend cannot do although its capability lines cover the features involved is written once,
below, with the reason: LEFT_OUT (it refuses the construct; the refusal is tested where the
construct is) and KNOWN_BUGS (a bug of the orchestrator's library: a strict xfail, so a fix
shows).

A need, in the functions below, is a feature of ``FEATURES`` (the backend supports it),
``feature=how`` (its capability line starts with ``how``: ``resume=emulated``), or a key of
LEFT_OUT or KNOWN_BUGS.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from interlock.core.backend.protocol import (
    FEATURES,
    Capabilities,
    Runner,
    available_backends,
    get_backend,
)
from interlock.core.base.errors import InterlockError

REFERENCE = "local"  # what the other backends are compared with

LEFT_OUT: dict[str, dict[str, str]] = {
    "finally.block.output_read_after": {
        "kfp-local": "KFP refuses outputs from inside an ExitHandler: a step reading an output of an il.finally_ "
        "block after it is refused at build time",
    },
    "map.tolerate_count": {
        "flyte-local": "an array node takes min_success_ratio only: il.map(tolerate=<an int>) is refused when the "
        "workflow is built, with a hint to give a fraction (tests/conformance/test_fanout.py)",
    },
    "map.subpipeline.tolerate": {
        "kfp-local": "a loop iteration of a nested pipeline cannot report a failed item and still succeed: "
        "il.map(tolerate=...) over a sub-pipeline is refused at build with a hint (test_map_subpipeline.py)",
        "flyte-local": "a Flyte dynamic workflow fails when one of its sub-workflow nodes fails: il.map(tolerate=...) "
        "over a sub-pipeline is refused at build with a hint (adapters/flyte/submap.py)",
    },
    # A map inside a mapped sub-pipeline's body, a step map or another mapped call: KFP renders both
    # (a ParallelFor inside the call's pipeline component, each item under <call>.<step>[i][j]).
    "map.subpipeline.nested": {
        "flyte-local": "a mapped sub-pipeline call inside a mapped body is refused at build with a hint "
        "(adapters/flyte/submap.py); a step map inside the body runs (tests/flyte_backend/test_flyte_submap.py)",
    },
    "lineage.recorded_by_core": {
        "kfp-local": "records its run in ML Metadata itself (KfpLocalOptions.lineage; tests/plugins/test_mlmd_lineage.py)",
    },
}

KNOWN_BUGS: dict[str, dict[str, str]] = {}


@cache
def runnable() -> dict[str, Capabilities]:
    """Each installed backend that loads here and says it can run, by name, the reference first.

    One that does not load (an extra is missing, as in the core-only venv) is not in it.
    """
    found: dict[str, Capabilities] = {}
    for name in available_backends():
        try:
            backend = get_backend(name)
            caps = backend.capabilities()
        except (InterlockError, ImportError):
            continue
        if isinstance(backend, Runner) and caps.supports("run"):
            found[name] = caps
    return dict(sorted(found.items(), key=lambda item: (item[0] != REFERENCE, item[0])))


def _meets(name: str, caps: Capabilities, need: str) -> bool:
    feature, sep, how = need.partition("=")
    if feature in FEATURES:
        return caps.features.get(feature, "unsupported").startswith(how) if sep else caps.supports(feature)
    if need in LEFT_OUT:
        return name not in LEFT_OUT[need]
    if need in KNOWN_BUGS:
        return True  # in the list, marked (backend_params)
    raise ValueError(f"unknown need {need!r}: a feature of FEATURES, feature=how, or a key of LEFT_OUT/KNOWN_BUGS")


def runnable_backends(*needs: str) -> list[str]:
    """The backends that run here and meet every need, the reference first."""
    return [name for name, caps in runnable().items() if all(_meets(name, caps, need) for need in needs)]


def other_backends(*needs: str) -> list[str]:
    """``runnable_backends`` but the reference: for a test whose reference case is its own test."""
    return [name for name in runnable_backends(*needs) if name != REFERENCE]


def backend_params(*needs: str) -> list[Any]:
    """``runnable_backends`` as ``pytest.param`` values, each with its KNOWN_BUGS among ``needs``
    as a strict xfail."""
    return [
        pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[need][name])
                                  for need in needs if name in KNOWN_BUGS.get(need, {})])
        for name in runnable_backends(*needs)
    ]
