"""Caching on the local backend: same inputs hit, DataFrames hash by content, a code change
misses, and a failed step never writes an entry.

The DataFrame tests need pandas and skip without it (the core-only tox env has none).
"""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from core_pipelines import caching

import interlock as il
from interlock.core.dsl.step import code_fingerprint
from interlock.core.run.cache import cache_key

_ids = itertools.count()


def entries(workdir: Path, step: str) -> list[Path]:
    """Complete cache entries of a step."""
    return sorted(p.parent for p in (workdir / "cache" / step).glob("*/COMPLETE"))


def frames() -> Any:
    pytest.importorskip("pandas")
    from core_pipelines import frames

    return frames


def test_same_inputs_are_served_from_cache(tmp_path: Path) -> None:
    caching = frames()
    first = il.run(caching.frame_cache, backend="local", workdir=tmp_path, n=4)
    assert first.steps["frame_total"].status == "succeeded"
    second = il.run(caching.frame_cache, backend="local", workdir=tmp_path, n=4)
    # make_frame is not cached: it builds a new DataFrame object with the same content, and
    # the consumer still hits because the key hashes the frame's values.
    assert second.steps["make_frame"].status == "succeeded"
    assert second.steps["frame_total"].status == "cached" and second.steps["frame_total"].cached
    assert second.outputs == first.outputs == {"o0": 9.0}
    assert len(entries(tmp_path, "frame_total")) == 1

    other = il.run(caching.frame_cache, backend="local", workdir=tmp_path, n=5)
    assert other.steps["frame_total"].status == "succeeded"
    assert other.outputs == {"o0": 15.0}
    assert len(entries(tmp_path, "frame_total")) == 2

    off = il.run(caching.frame_cache, backend="local", workdir=tmp_path, n=4, cache=False)
    assert off.steps["frame_total"].status == "succeeded"


def test_dataframe_key_is_content_not_identity() -> None:
    pd = pytest.importorskip("pandas")
    spec = frames().frame_total.spec
    a = pd.DataFrame({"a": [1, 2], "b": [0.5, 1.0]})
    b = pd.DataFrame({"a": [1, 2], "b": [0.5, 1.0]})
    assert a is not b
    assert cache_key(spec, {"df": a}) == cache_key(spec, {"df": b})
    assert cache_key(spec, {"df": a}) != cache_key(spec, {"df": b.assign(b=[0.5, 1.5])})
    assert cache_key(spec, {"df": a}) != cache_key(spec, {"df": a.astype({"a": "float64"})})  # dtypes count
    assert cache_key(spec, {"df": a}) != cache_key(spec, {"df": a.rename(columns={"b": "c"})})


def write_module(root: Path, body: str) -> str:
    name = f"gen_calc_{next(_ids)}"
    (root / f"{name}.py").write_text(textwrap.dedent(body))
    return name


CALC = """
    import interlock as il

    @il.step(name="calc", cache=il.Cache())
    def calc(x: int) -> int:
        return {expr}

    @il.pipeline(name="calc-pipe")
    def pipe(x: int = 2):
        return calc(x=x)
"""

VERSIONED = """
    import interlock as il

    def _calc(x: int) -> int:
        return x + 1

    calc = il.step(name="calc", cache=il.Cache(version={version!r}))(_calc)

    @il.pipeline(name="calc-pipe")
    def pipe(x: int = 2):
        return calc(x=x)
"""


def load(monkeypatch: pytest.MonkeyPatch, root: Path, body: str) -> Any:
    import importlib

    monkeypatch.syspath_prepend(str(root))
    return importlib.import_module(write_module(root, body))


def test_changed_source_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = tmp_path / "gen"
    gen.mkdir()
    v1 = load(monkeypatch, gen, CALC.format(expr="x + 1"))
    v2 = load(monkeypatch, gen, CALC.format(expr="x * 10"))
    assert v1.calc.spec.fingerprint != v2.calc.spec.fingerprint
    wd = tmp_path / "wd"
    assert il.run(v1.pipe, backend="local", workdir=wd).outputs == {"o0": 3}
    hit = il.run(v1.pipe, backend="local", workdir=wd)
    assert hit.steps["calc"].status == "cached" and hit.outputs == {"o0": 3}
    changed = il.run(v2.pipe, backend="local", workdir=wd)
    assert changed.steps["calc"].status == "succeeded" and changed.outputs == {"o0": 20}
    assert il.run(v1.pipe, backend="local", workdir=wd).steps["calc"].status == "cached"


def test_a_function_without_source_is_fingerprinted_by_its_code() -> None:
    made: list[Any] = []
    for body in ("return 1", "return 1", "return 2"):
        namespace: dict[str, Any] = {}
        exec(f"def made():\n    {body}\n", namespace)  # noqa: S102  (no file: no source)
        made.append(namespace["made"])
    same, again, other = (code_fingerprint(fn) for fn in made)
    assert same == again != other
    assert code_fingerprint(made[0], "2") != same


def test_explicit_version_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = tmp_path / "gen"
    gen.mkdir()
    a = load(monkeypatch, gen, VERSIONED.format(version="1"))
    b = load(monkeypatch, gen, VERSIONED.format(version="2"))
    same = load(monkeypatch, gen, VERSIONED.format(version="1"))
    assert a.calc.spec.fingerprint == same.calc.spec.fingerprint == code_fingerprint(a._calc, "1")
    assert b.calc.spec.fingerprint == code_fingerprint(a._calc, "2") != a.calc.spec.fingerprint
    wd = tmp_path / "wd"
    il.run(a.pipe, backend="local", workdir=wd)
    assert il.run(same.pipe, backend="local", workdir=wd).steps["calc"].status == "cached"
    assert il.run(b.pipe, backend="local", workdir=wd).steps["calc"].status == "succeeded"


def test_ignored_inputs_do_not_change_the_key() -> None:
    @il.step(cache=il.Cache(ignore_inputs=("log_level",)))
    def fit(x: int, log_level: str = "INFO") -> int:
        return x

    assert cache_key(fit.spec, {"x": 1, "log_level": "DEBUG"}) == cache_key(fit.spec, {"x": 1})
    assert cache_key(fit.spec, {"x": 1}) != cache_key(fit.spec, {"x": 2})


def test_failed_step_writes_no_cache_entry(tmp_path: Path) -> None:
    flag = tmp_path / "fail-now"
    flag.write_text("1")
    wd = tmp_path / "wd"
    with pytest.raises(il.StepFailed) as info:
        il.run(caching.fail_cache, backend="local", workdir=wd, flag_path=str(flag))
    assert info.value.step == "maybe_fail"
    assert entries(wd, "maybe_fail") == []

    flag.unlink()  # same inputs: the key is the same, but nothing was cached for it
    ok = il.run(caching.fail_cache, backend="local", workdir=wd, flag_path=str(flag))
    assert ok.steps["maybe_fail"].status == "succeeded" and ok.outputs == {"o0": 2}
    assert len(entries(wd, "maybe_fail")) == 1
    again = il.run(caching.fail_cache, backend="local", workdir=wd, flag_path=str(flag))
    assert again.steps["maybe_fail"].status == "cached"
    receipt = json.loads(Path(again.receipt_path).read_text())
    assert receipt["cache_hits"] == ["maybe_fail"]
