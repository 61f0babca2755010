"""The compile benchmarks time the same kind of work on both sides.

flytekit and kfp load their library on import, before the clock; interlock loads its modules
on first use, so the benchmark runners import them before the clock too (both sides). Without that, the
interlock side imported core.step, core.pipeline and core.build inside the timed region, and
(PYTHONDONTWRITEBYTECODE being set here) compiled them from source there: about 6 ms of a
50-step Flyte compile of 40 ms that the native side never paid.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.perf

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# What a pipeline module's `il.step` / `il.pipeline` load: library, not compile work.
DEFINITION_MODULES = {"interlock.core.dsl.step", "interlock.core.dsl.pipeline", "interlock.core.dsl.build"}


@pytest.mark.parametrize(("script", "native"), [("flyte_compile", "flytekit"), ("kfp_compile", "kfp"),
                                                ("argo_compile", "hera")])
def test_no_library_import_inside_the_clock(script: str, native: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = importlib.import_module(script)
    bench.SIDES.warm_up(tmp_path)
    seen = {}
    for flavour in (native, "interlock"):
        work = tmp_path / flavour
        work.mkdir()
        seen[flavour] = set(bench.SIDES.run(flavour, 3, work, tmp_path)["in_clock"])
    assert not seen["interlock"] & DEFINITION_MODULES, seen["interlock"]
    assert not {m for m in seen["interlock"] if m.startswith("interlock.")}, seen["interlock"]
    # The native side's own library is all loaded before the clock as well.
    assert not {m for m in seen[native] if m.split(".")[0] in ("flytekit", "kfp", "hera")}, seen[native]
