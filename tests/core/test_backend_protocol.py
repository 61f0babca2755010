"""The backend seam: a tiny adapter made here is found by il.run and `interlock backends`;
unknown backends and unsupported features fail before anything runs."""

from __future__ import annotations

import dataclasses
import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from core_pipelines import basic

import interlock as il
from interlock.core.backend import protocol as backends
from interlock.core.backend.protocol import (
    Backend,
    BackendOptions,
    Capabilities,
    Compiler,
    Runner,
    RunOptions,
    get_backend,
)
from interlock.core.base.errors import BackendNotFound
from interlock.core.cli.main import main
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.record.outcomes import RunResult, StepOutcome


@dataclasses.dataclass(frozen=True)
class ToyCompileOptions(BackendOptions):
    project: str | None = None


class ToyBackend:
    """Runs nothing: records what it was asked and answers with a fixed output."""

    name = "toy"

    def __init__(self, features: dict[str, str] | None = None) -> None:
        self.features = features if features is not None else {"run": "native", "gpu": "unsupported", "gates": "unsupported"}
        self.runs: list[tuple[PipelineSpec, dict[str, Any], RunOptions]] = []
        self.compiled: list[Path] = []

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.name, features=self.features, lossy=("toy: retries are not mapped",),
            description="a backend made in the tests", compile_options=ToyCompileOptions,
        )

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{spec.name}.toy.json"
        given = {k: v for k, v in dataclasses.asdict(options).items() if v is not None}
        path.write_text(json.dumps({"spec": spec.to_json(), "options": given}))
        self.compiled.append(path)
        return [path]

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        self.runs.append((spec, params, options))
        steps = {n.name: StepOutcome("succeeded", attempts=1) for n in spec.nodes}
        return RunResult(spec.name, options.run_id, self.name, "succeeded", {"o0": f"toy:{params}"}, steps, None)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyBackend:
    backend = ToyBackend()
    monkeypatch.setitem(backends._registered, "toy", lambda: backend)
    return backend


@il.step(resources=il.Resources(gpu=1, accelerator="nvidia-h200"))
def gpu_step(x: int) -> int:
    return x


@il.pipeline(name="needs-gpu")
def needs_gpu(x: int = 1):
    return gpu_step(x=x)


@il.pipeline(name="needs-param")
def needs_param(prefix: str):
    return basic.label(x=1, prefix=prefix)


def test_the_toy_implements_the_protocol() -> None:
    assert isinstance(ToyBackend(), Backend)


def test_il_run_finds_a_registered_backend(toy: ToyBackend, tmp_path: Path) -> None:
    result = il.run(basic.one_output, backend="toy", workdir=tmp_path, run_id="r-toy", x=5)
    assert result.backend == "toy" and result.outputs == {"o0": "toy:{'x': 5}"}
    spec, params, options = toy.runs[0]
    assert spec == il.spec(basic.one_output)
    assert params == {"x": 5}
    assert (options.run_id, options.workdir) == ("r-toy", tmp_path)


def test_default_backend_comes_from_the_environment(toy: ToyBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_BACKEND", "toy")
    assert il.run(basic.one_output).backend == "toy"
    assert len(toy.runs) == 1


def test_il_compile_uses_the_backend(toy: ToyBackend, tmp_path: Path) -> None:
    files = il.compile(basic.one_output, backend="toy", out=tmp_path / "build", project="p")
    assert files == toy.compiled
    data = json.loads(files[0].read_text())
    assert PipelineSpec.from_json(data["spec"]) == il.spec(basic.one_output)
    assert data["options"] == {"project": "p"}


def test_parameters_are_checked_before_the_backend_runs(toy: ToyBackend) -> None:
    with pytest.raises(il.PipelineDefinitionError, match=r"unknown parameter\(s\) \['y'\]"):
        il.run(basic.one_output, backend="toy", y=1)
    with pytest.raises(il.PipelineDefinitionError, match=r"parameter value 'two' \(str\) does not fit int"):
        il.run(basic.one_output, backend="toy", x="two")
    with pytest.raises(il.PipelineDefinitionError, match="port 'prefix': missing required parameter of type str"):
        il.run(needs_param, backend="toy")
    assert toy.runs == []


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        ({"retries": "three"}, "parameter value conn.retries='three' (str) does not fit int"),
        ({"user": "x"}, "parameter value conn has no field(s) ['user']; fields are ['host', 'password', 'dsn', 'retries']"),
        ("db.internal", "parameter value 'db.internal' (str) does not fit Connection"),
    ],
)
def test_dataclass_parameters_are_checked_field_by_field(toy: ToyBackend, conn: Any, message: str) -> None:
    # Regression: a JSON object for a dataclass parameter was passed on unchecked, and a bad
    # field failed later inside the backend with a bare ValueError.
    from core_pipelines import receipts

    with pytest.raises(il.PipelineDefinitionError) as info:
        il.run(receipts.receipt_config, backend="toy", conn=conn)
    assert (info.value.pipeline, info.value.port) == ("receipt-config", "conn")
    assert message in str(info.value)
    assert toy.runs == []
    assert il.run(receipts.receipt_config, backend="toy", conn={"retries": 4}).succeeded


def test_backends_command_lists_the_toy(toy: ToyBackend, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "toy\n  a backend made in the tests" in out
    assert "gpu" in out and "unsupported" in out
    assert "! toy: retries are not mapped" in out
    assert "local\n" in out  # the entry-point backend is listed too

    assert main(["backends", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["toy"]["features"]["gpu"] == "unsupported"
    assert rows["local"]["features"]["run"] == "native"


def test_local_backend_comes_from_the_entry_point_group() -> None:
    assert "local" in {ep.name for ep in entry_points(group=backends.ENTRY_POINT_GROUP)}
    assert get_backend("local").name == "local"


def test_unknown_backend_lists_the_installed_ones(toy: ToyBackend) -> None:
    with pytest.raises(BackendNotFound) as info:
        il.run(basic.one_output, backend="nope")
    message = str(info.value)
    assert "unknown backend 'nope'; installed:" in message
    installed = message.split("installed: ", 1)[1].split("\n", 1)[0].split(", ")
    assert "local" in installed and "toy" in installed
    assert installed == sorted(installed)
    assert isinstance(info.value, il.InterlockError)
    with pytest.raises(BackendNotFound, match="unknown backend 'nope'"):
        il.compile(basic.one_output, backend="nope", out="unused")


def test_unsupported_capability_fails_before_running(toy: ToyBackend, tmp_path: Path) -> None:
    with pytest.raises(il.CapabilityError) as info:
        il.run(needs_gpu, backend="toy")
    err = info.value
    assert isinstance(err, il.PipelineDefinitionError)
    assert "backend 'toy' cannot express 'gpu' (used by gpu_step)" in str(err)
    assert (err.pipeline, err.step) == ("needs-gpu", "gpu_step")
    assert "interlock backends" in (err.hint or "")
    with pytest.raises(il.CapabilityError, match="'gates'"):
        il.run(basic.late_gate, backend="toy")
    with pytest.raises(il.CapabilityError, match="'gpu'"):
        il.compile(needs_gpu, backend="toy", out=tmp_path)
    assert toy.runs == [] and toy.compiled == []


def test_a_compile_only_backend_refuses_to_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    backend = ToyBackend(features={"gpu": "native", "accelerator": "native"})
    monkeypatch.setitem(backends._registered, "toy-compile", lambda: backend)
    with pytest.raises(il.CapabilityError, match="compiles only"):
        il.run(basic.one_output, backend="toy-compile")
    assert il.compile(needs_gpu, backend="toy-compile", out=tmp_path)  # compiling is fine
    assert backend.runs == []


class _BrokenEntryPoint:
    """Looks like an entry point whose adapter's dependencies are not installed."""

    def load(self) -> Any:
        raise ImportError("No module named 'flytekit'")


def test_a_backend_that_cannot_import(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(backends._registered, "broken", _BrokenEntryPoint())  # type: ignore[arg-type]
    with pytest.raises(BackendNotFound, match="registered but cannot be imported: No module named 'flytekit'"):
        get_backend("broken")
    assert main(["backends"]) == 0  # one broken adapter does not hide the others
    out = capsys.readouterr().out
    assert "broken\n  not available:" in out and "local\n" in out


def test_an_object_that_is_not_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._registered, "odd", lambda: object())
    with pytest.raises(BackendNotFound, match="does not implement the Backend protocol"):
        get_backend("odd")


# -- roles: compile, run or both ----------------------------------------------------------------


class ToyCompiler:
    """Compile-only, as the cluster backends are: it has no run at all."""

    name = "toy-compiler"

    def capabilities(self) -> Capabilities:
        return Capabilities(backend=self.name, features={"run": "unsupported: submit the file"})

    def compile(self, spec: PipelineSpec, out: Path, options: BackendOptions) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{spec.name}.txt"
        path.write_text(spec.name)
        return [path]


class ToyRunner:
    """Run-only: it has no compile."""

    name = "toy-runner"

    def capabilities(self) -> Capabilities:
        return Capabilities(backend=self.name, features={"run": "native"})

    def run(self, spec: PipelineSpec, params: dict[str, Any], options: RunOptions) -> RunResult:
        return RunResult(spec.name, options.run_id, self.name, "succeeded", {}, {}, None)


def test_each_role_is_its_own_protocol() -> None:
    assert isinstance(ToyBackend(), Compiler) and isinstance(ToyBackend(), Runner)
    assert isinstance(ToyCompiler(), Compiler) and not isinstance(ToyCompiler(), Runner)
    assert isinstance(ToyRunner(), Runner) and not isinstance(ToyRunner(), Compiler)
    assert all(isinstance(b, Backend) for b in (ToyBackend(), ToyCompiler(), ToyRunner()))


def test_a_backend_without_run_refuses_to_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(backends._registered, "toy-compiler", ToyCompiler)
    with pytest.raises(il.CapabilityError, match="backend 'toy-compiler' compiles only") as info:
        il.run(basic.one_output, backend="toy-compiler", workdir=tmp_path)
    assert info.value.hint == "submit the file"  # the backend's own advice, from its capabilities
    assert il.compile(basic.one_output, backend="toy-compiler", out=tmp_path) == [tmp_path / "one-output.txt"]
    assert not (tmp_path / "runs").exists()


def test_a_backend_without_compile_refuses_to_compile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(backends._registered, "toy-runner", ToyRunner)
    with pytest.raises(il.CapabilityError, match="backend 'toy-runner' runs only; it cannot compile"):
        il.compile(basic.one_output, backend="toy-runner", out=tmp_path / "build")
    assert not (tmp_path / "build").exists()
    assert il.run(basic.one_output, backend="toy-runner", workdir=tmp_path).succeeded


BUILTIN = ("local", "flyte", "flyte-local", "kfp", "kfp-local")


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_backend_meets_the_contract(name: str) -> None:
    """Roles and capabilities agree, and the run options are a usable options dataclass."""
    try:
        backend = get_backend(name)
    except BackendNotFound as exc:
        pytest.skip(f"{name} is not installed here: {exc.message}")
    caps = backend.capabilities()
    assert backend.name == caps.backend == name
    assert isinstance(backend, Compiler | Runner)
    # Runs exactly when it says it runs: a compile-only backend carries no run that only raises.
    assert isinstance(backend, Runner) == caps.supports("run"), caps.features.get("run")
    assert set(caps.features) <= set(backends.FEATURES)
    assert issubclass(caps.run_options, BackendOptions)
    assert dataclasses.is_dataclass(caps.run_options)
    defaults = caps.run_options()  # every option has a default
    assert caps.run_options.from_mapping({}, backend=name) == defaults
    if not isinstance(backend, Runner):
        assert caps.run_options is BackendOptions  # nothing to run, so no run options


# -- run options: typed, public, checked before anything runs -------------------------------------


@dataclasses.dataclass(frozen=True)
class ToyOptions(BackendOptions):
    depth: int = 1
    fast: bool = False
    label: str | None = None
    ratio: float = 0.5


@dataclasses.dataclass(frozen=True)
class OtherOptions(BackendOptions):
    depth: int = 1


@pytest.fixture
def optioned(monkeypatch: pytest.MonkeyPatch) -> ToyBackend:
    backend = ToyBackend()
    plain = backend.capabilities

    def capabilities() -> Capabilities:
        return dataclasses.replace(plain(), run_options=ToyOptions)

    monkeypatch.setattr(backend, "capabilities", capabilities)
    monkeypatch.setitem(backends._registered, "toy", lambda: backend)
    return backend


def test_run_options_reach_the_backend_typed(optioned: ToyBackend, tmp_path: Path) -> None:
    il.run(basic.one_output, backend="toy", workdir=tmp_path, x=1)
    il.run(basic.one_output, backend="toy", workdir=tmp_path, options=ToyOptions(depth=3), x=1)
    il.run(basic.one_output, backend="toy", workdir=tmp_path, x=1,
           options={"depth": "4", "fast": "yes", "label": "null", "ratio": "2"})
    il.run(basic.one_output, backend="toy", workdir=tmp_path, x=1, options={"depth": 5, "ratio": 1})
    got = [options.backend_options for _, _, options in optioned.runs]
    assert got == [ToyOptions(), ToyOptions(depth=3), ToyOptions(depth=4, fast=True, ratio=2.0), ToyOptions(depth=5, ratio=1)]
    assert all(options.functions == basic.one_output.functions for _, _, options in optioned.runs)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deep": 1}, "backend 'toy' has no run option(s) ['deep']; its options are: depth, fast, label, ratio"),
        ({"depth": "many"}, "backend 'toy': run option depth='many' is not of type int"),
        ({"fast": "maybe"}, "backend 'toy': run option fast='maybe' is not of type bool"),
        ({"depth": True}, "backend 'toy': run option depth=True is not of type int"),
        ({"label": 3}, "backend 'toy': run option label=3 is not of type str"),
        (OtherOptions(), "backend 'toy' takes ToyOptions run options, not OtherOptions"),
    ],
)
def test_bad_run_options_are_refused_before_running(
    optioned: ToyBackend, options: Any, message: str, tmp_path: Path
) -> None:
    with pytest.raises(il.PolicyError) as info:
        il.run(basic.one_output, backend="toy", workdir=tmp_path, options=options, x=1)
    assert message in str(info.value)
    assert optioned.runs == []


def test_a_backend_without_options_says_so(tmp_path: Path) -> None:
    with pytest.raises(il.PolicyError, match=r"backend 'local' has no run option\(s\) \['spawn'\]; it takes no run options"):
        il.run(basic.one_output, backend="local", workdir=tmp_path, options={"spawn": False}, x=1)
    with pytest.raises(il.PolicyError, match="backend 'local' takes BackendOptions run options, not OtherOptions"):
        il.run(basic.one_output, backend="local", workdir=tmp_path, options=OtherOptions(), x=1)
    assert not (tmp_path / "runs").exists()
    assert il.run(basic.one_output, backend="local", workdir=tmp_path, options=BackendOptions(), x=1).succeeded


def test_cli_maps_option_flags_onto_the_backends_options(
    optioned: ToyBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "core_pipelines.basic:one_output"
    assert main(["run", target, "--backend", "toy", "--workdir", str(tmp_path), "--option", "depth=7",
                 "--option", "fast=true"]) == 0
    assert optioned.runs[-1][2].backend_options == ToyOptions(depth=7, fast=True)
    capsys.readouterr()
    assert main(["run", target, "--backend", "toy", "--workdir", str(tmp_path), "--option", "speed=1"]) == 2
    err = capsys.readouterr().err
    assert "interlock: error [POLICY]" in err
    assert "has no run option(s) ['speed']; its options are: depth, fast, label, ratio" in err
    assert main(["run", target, "--backend", "toy", "--workdir", str(tmp_path), "--option", "depth"]) == 2
    assert "run option 'depth' must be key=value" in capsys.readouterr().err
    assert len(optioned.runs) == 1

    assert main(["backends"]) == 0
    assert "toy\n" in (out := capsys.readouterr().out) and "run options (--option K=V): depth, fast, label, ratio" in out
    assert main(["backends", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["toy"]["run_options"] == ["depth", "fast", "label", "ratio"]
    assert rows["local"]["run_options"] == []


# -- compile options: declared by the backend, read and checked as run options are ---------------


@pytest.fixture
def compile_optioned(monkeypatch: pytest.MonkeyPatch) -> ToyBackend:
    backend = ToyBackend()
    plain = backend.capabilities

    def capabilities() -> Capabilities:
        return dataclasses.replace(plain(), compile_options=ToyOptions)

    monkeypatch.setattr(backend, "capabilities", capabilities)
    monkeypatch.setitem(backends._registered, "toy", lambda: backend)
    return backend


def _compiled_options(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())["options"])


def test_compile_options_reach_the_backend_typed(compile_optioned: ToyBackend, tmp_path: Path) -> None:
    [a] = il.compile(basic.one_output, backend="toy", out=tmp_path / "a", depth="4", fast="yes", ratio="2")
    [b] = il.compile(basic.one_output, backend="toy", out=tmp_path / "b", options=ToyOptions(depth=3))
    assert _compiled_options(a) == {"depth": 4, "fast": True, "ratio": 2.0}
    assert _compiled_options(b) == {"depth": 3, "fast": False, "ratio": 0.5}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deep": 1}, "backend 'toy' has no compile option(s) ['deep']; its options are: depth, fast, label, ratio"),
        ({"depth": "many"}, "backend 'toy': compile option depth='many' is not of type int"),
        ({"fast": "maybe"}, "backend 'toy': compile option fast='maybe' is not of type bool"),
        ({"options": OtherOptions()}, "backend 'toy' takes ToyOptions compile options, not OtherOptions"),
    ],
)
def test_bad_compile_options_are_refused_before_anything_is_written(
    compile_optioned: ToyBackend, options: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(il.PolicyError) as info:
        il.compile(basic.one_output, backend="toy", out=tmp_path / "out", **options)
    assert message in str(info.value)
    assert compile_optioned.compiled == [] and not (tmp_path / "out").exists()


def test_a_compiler_without_options_says_so(tmp_path: Path) -> None:
    with pytest.raises(il.PolicyError, match=r"backend 'local' has no compile option\(s\) \['image'\]; it takes no compile options"):
        il.compile(basic.one_output, backend="local", out=tmp_path / "out", image="img:1")


def test_cli_takes_compile_options_as_flags_and_as_option(
    compile_optioned: ToyBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "core_pipelines.basic:one_output"
    assert main(["compile", target, "--backend", "toy", "--out", str(tmp_path / "a"), "--depth", "7",
                 "--option", "fast=true"]) == 0
    assert _compiled_options(compile_optioned.compiled[-1]) == {"depth": 7, "fast": True, "ratio": 0.5}
    capsys.readouterr()
    assert main(["compile", target, "--backend", "toy", "--out", str(tmp_path / "b"), "--option", "speed=1"]) == 2
    assert "has no compile option(s) ['speed']; its options are: depth, fast, label, ratio" in capsys.readouterr().err
    assert main(["compile", target, "-b", "toy", "--out", str(tmp_path / "c"), "--ratio", "fast"]) == 2
    assert "compile option ratio='fast' is not of type float" in capsys.readouterr().err
    assert len(compile_optioned.compiled) == 1 and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    with pytest.raises(SystemExit):  # another backend's flag is not a flag of this one
        main(["compile", target, "--backend", "local", "--out", str(tmp_path / "d"), "--depth", "7"])

    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "toy\n" in out and "compile options (--option K=V): depth, fast, label, ratio" in out
    assert main(["backends", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["toy"]["compile_options"] == ["depth", "fast", "label", "ratio"]
    assert rows["local"]["compile_options"] == []


def test_a_backend_that_can_run_joins_the_tests_lists_of_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/backends.py: the conformance suite's lists come from the entry points and capabilities."""
    import backends as tested

    runner = ToyBackend(features={"run": "native", "gates": "native", "condition.or": "unsupported"})
    monkeypatch.setitem(backends._registered, "toy", lambda: runner)
    monkeypatch.setitem(backends._registered, "toy-compiler", ToyCompiler)
    tested.runnable.cache_clear()
    try:
        assert "toy" in tested.runnable_backends() and "toy" in tested.other_backends()
        assert tested.runnable_backends()[0] == tested.REFERENCE
        assert "toy-compiler" not in tested.runnable_backends()  # compile-only: it cannot run
        assert "toy" in tested.runnable_backends("gates") and "toy" not in tested.runnable_backends("condition.or")
        assert "toy" not in tested.runnable_backends("resume=emulated")
        monkeypatch.setitem(tested.KNOWN_BUGS, "toy.bug", {"toy": "a bug of the toy's library"})
        params = {p.values[0]: p for p in tested.backend_params("toy.bug")}
        assert list(params) == tested.runnable_backends()
        assert [m.kwargs["reason"] for m in params["toy"].marks] == ["a bug of the toy's library"]
        assert not params[tested.REFERENCE].marks
        with pytest.raises(ValueError, match="unknown need 'no-such-feature'"):
            tested.runnable_backends("no-such-feature")
    finally:
        tested.runnable.cache_clear()
