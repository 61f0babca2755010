"""The ``interlock`` command: backends, run, compile, graph, show, spec, lineage, watch, triggers."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import (
    DEFAULT_BACKEND,
    BackendOptions,
    Compiler,
    available_backends,
    default_backend,
    default_workdir,
    get_backend,
)
from interlock.core.base.errors import (
    BackendNotFound,
    InterlockError,
    PipelineDefinitionError,
    PolicyError,
    RunFailed,
    StepFailed,
    StepStopped,
)
from interlock.core.base.status import Status
from interlock.core.base.suggest import did_you_mean
from interlock.core.cli.triggers import add_parsers as add_trigger_parsers
from interlock.core.dsl.loader import load_pipeline
from interlock.core.model.codecs import TypeKind, codec
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.types import TypeSpec
from interlock.core.record.efficiency import receipt_line
from interlock.core.record.lineage import LineageProvider, lineage_provider
from interlock.core.report.console import HEARTBEAT_S, RunConsole
from interlock.core.run.env import EnvName
from interlock.core.run.redact import Redactor
from interlock.core.run.runtime import StopRequested

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT; a SIGTERM stop exits 143 (StepStopped.exit_code)


def parse_param(raw: str, spec: PipelineSpec) -> tuple[str, Any]:
    """``key=value``; the value is read as the parameter's declared type (JSON for containers)."""
    if "=" not in raw:
        raise PipelineDefinitionError(f"parameter {raw!r} must be key=value", pipeline=spec.name)
    key, value = raw.split("=", 1)
    port = spec.param(key)
    if port is None:
        names = [p.name for p in spec.params]
        raise PipelineDefinitionError(
            f"unknown parameter {key!r}; parameters are {names}", pipeline=spec.name, port=key,
            hint=did_you_mean(key, names) or "`interlock spec FILE:PIPELINE` lists the parameters and their types",
        )
    return key, coerce(value, port.type, spec.name, key)


def parse_option(raw: str, role: str = "run") -> tuple[str, str]:
    """``key=value`` for a backend's run or compile option; its options class reads the value."""
    key, sep, value = raw.partition("=")
    if not sep or not key:
        raise PolicyError(f"{role} option {raw!r} must be key=value")
    return key.replace("-", "_"), value


def coerce(value: str, t: TypeSpec, pipeline: str, key: str) -> Any:
    if t.optional and value == "null":  # JSON's null: the only way to pass None on a command line
        return None
    try:
        return codec(t).parse(value)
    except ValueError as exc:
        json_kinds = (TypeKind.DATACLASS, TypeKind.LIST, TypeKind.DICT)
        wants_json = t.kind in json_kinds or value.lstrip()[:1] in ("{", "[")
        hint = (f"{t.describe()} is read as JSON: quote the keys and strings, and the whole value for the shell, "
                f"e.g. -p '{key}={_json_example(t)}'") if wants_json else None
        raise PipelineDefinitionError(
            f"cannot read {value!r} as {t.describe()}" + (" (expected JSON)" if wants_json else ""),
            pipeline=pipeline, port=key, hint=hint,
        ) from exc


def _json_example(t: TypeSpec) -> str:
    if t.kind is TypeKind.LIST:
        return "[1, 2]"
    if t.kind is TypeKind.DATACLASS:
        try:  # the dataclass's own first field, with its default
            import dataclasses

            from interlock.core.model.refs import import_ref

            first = dataclasses.fields(import_ref(str(t.name)))[0]
            default = first.default if first.default is not dataclasses.MISSING else 1
            return json.dumps({first.name: default})
        except Exception:  # noqa: BLE001 - only an example in a message
            return '{"field": 1}'
    return '{"key": "value"}'


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    if hasattr(value, "to_dict") and callable(value.to_dict) and type(value).__name__ == "Metrics":
        return ", ".join(f"{k}={v:.4f}" for k, v in value.to_dict().items()) or "(none)"
    if type(value).__name__ == "DataFrame":
        return f"DataFrame{tuple(value.shape)}"
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def writable_dir(path: Path, option: str) -> None:
    """Refuse, before anything runs, a directory that cannot be created or written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise PipelineDefinitionError(
            f"{option} {path}: cannot write there ({exc.strerror or exc})",
            hint=f"pass a {option} you can write to",
        ) from exc


def cmd_backends(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for name in available_backends():
        try:
            backend = get_backend(name)
            caps = backend.capabilities()
        except InterlockError as exc:
            rows.append({"backend": name, "error": exc.message})
            continue
        rows.append({
            "backend": name, "description": caps.description, "features": caps.features,
            "lossy": list(caps.lossy), "run_options": caps.run_options.names(),
            "compile_options": caps.compile_options.names() if isinstance(backend, Compiler) else [],
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"{row['backend']}")
        if "error" in row:
            print(f"  not available: {row['error']}")
            continue
        if row["description"]:
            print(f"  {row['description']}")
        for feature, how in row["features"].items():
            print(f"  {feature:<26} {how}")
        for item in row["lossy"]:
            print(f"  ! {item}")
        if row["run_options"]:
            print(f"  run options (--option K=V): {', '.join(row['run_options'])}")
        if row["compile_options"]:
            print(f"  compile options (--option K=V): {', '.join(row['compile_options'])}")
        print()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from interlock.core.backend.api import run
    from interlock.core.backend.protocol import as_runner, run_options_for

    if args.help or not args.target:
        return _run_help(args)
    pipe = load_pipeline(args.target)
    spec = pipe.spec
    params = dict(parse_param(p, spec) for p in args.param)
    options = dict(parse_option(o) for o in args.option)
    backend = args.backend or default_backend()
    # A wrong backend or option fails here, before the "running" line.
    run_options_for(as_runner(spec, get_backend(backend))[1], options or None)
    writable_dir(Path(args.workdir) if args.workdir else default_workdir(), "--workdir")
    print(f"interlock: running {spec.name} on {backend} ({len(spec.nodes)} steps)", file=sys.stderr)
    t0 = time.monotonic()
    try:
        with _stop_on_sigterm():
            result = run(
                pipe, backend, workdir=args.workdir, run_id=args.run_id, cache=not args.no_cache,
                progress=RunConsole(verbose=args.verbose, heartbeat_s=args.heartbeat), options=options or None,
                resume=args.resume, checkpoint_store=args.checkpoint_store, pushgateway=args.pushgateway, **params,
            )
    except StepStopped as exc:
        print(f"\nSTOPPED after {time.monotonic() - t0:.1f}s: {exc.headline()}", file=sys.stderr)
        if exc.receipt_path:
            print(f"  receipt: {exc.receipt_path}", file=sys.stderr)
            _print_report(exc.receipt_path, sys.stderr)
        print(f"  resume with: {_resume_command(args, backend, exc)}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"\nFAILED after {time.monotonic() - t0:.1f}s: {exc}", file=sys.stderr)
        print_failure_detail(exc, debug=args.debug)
        _print_report(exc.receipt_path, sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, StopRequested) as exc:  # between steps: no step was running
        name = exc.signal if isinstance(exc, StopRequested) else "SIGINT"
        print(f"\nSTOPPED by {name} after {time.monotonic() - t0:.1f}s, outside any step", file=sys.stderr)
        return 143 if name == "SIGTERM" else EXIT_INTERRUPTED
    wall = time.monotonic() - t0
    print(f"\n{spec.name}: {result.status} in {wall:.1f}s  (run {result.run_id}, backend {backend})")
    cached = [n for n, o in result.steps.items() if o.status is Status.CACHED]
    skipped = [n for n, o in result.steps.items() if o.status is Status.SKIPPED]
    if cached:
        print(f"  served from cache: {', '.join(cached)}")
    if skipped:
        print(f"  skipped by a gate: {', '.join(skipped)}")
    # Masked as the receipt masks them: an output may carry a parameter's secret or a URL password.
    redactor = Redactor.for_values({**{p.name: p.default for p in spec.params if p.has_default}, **params})
    for name, value in result.outputs.items():
        print(f"  {name}: {redactor.text(_fmt_value(value))}")
    print(f"  receipt: {result.receipt_path}")
    if line := receipt_line(result.receipt_path):
        print(f"  {line}")
    _print_report(result.receipt_path)
    return 0


def _run_help(args: argparse.Namespace) -> int:
    """``interlock run FILE --help``: the usage, then the pipeline's parameters (as pyflyte run does)."""
    print(args.parser.format_help().rstrip())
    if not args.target:
        if not args.help:
            print("\ninterlock run: error: name a pipeline: FILE_OR_MODULE[:PIPELINE]", file=sys.stderr)
            return EXIT_USAGE
        return 0
    pipe = load_pipeline(args.target)
    spec = pipe.spec
    print(f"\npipeline {spec.name} ({args.target})")
    if spec.doc:
        print(f"  {spec.doc.strip().splitlines()[0]}")
    print("\nparameters (-p NAME=VALUE; lists, dicts and dataclasses as JSON):")
    if not spec.params:
        print("  (none)")
    for p in spec.params:
        default = f"default: {json.dumps(p.default)}" if p.has_default else "required"
        kind = p.type.describe() + (f" {list(p.type.choices)}" if p.type.choices and p.type.name else "")
        print(f"  {p.name:<20} {kind:<22} {default}")
    return 0


def _print_report(receipt_path: Any, stream: Any = None) -> None:
    report = Path(receipt_path).with_name("report.html") if receipt_path else None
    if report is not None and report.is_file():
        print(f"  report:  {report}", file=stream or sys.stdout)


def print_failure_detail(exc: RunFailed, *, debug: bool = False, stream: Any = None) -> None:
    """What a failure message adds to ``str(exc)`` (step, kind, reason, hint, receipt): the
    detail the reason leaves out, and the traceback's tail (all of it with ``debug``)."""
    from interlock.core.run.redact import DEFAULT as DEFAULT_REDACTOR
    from interlock.core.run.tracebacks import tail, user_traceback

    stream = stream or sys.stderr
    failure = exc.failure if isinstance(exc, StepFailed) else None
    detail = failure.message if failure else ""
    if detail and detail not in exc.reason:  # e.g. the validation report, column by column
        print(f"\n{detail}", file=stream)
    recorded = failure.traceback if failure else None
    if recorded and not debug:
        print("\n  traceback (last lines; --debug for all of it):", file=stream)
        print(_indent(tail(recorded)), file=stream)
    elif recorded:
        print("\n  traceback (interlock's frames trimmed):", file=stream)
        print(_indent(recorded.rstrip()), file=stream)
    if debug and exc.__cause__ is not None:  # in this process: the whole stack, interlock included
        print("\n  full traceback:", file=stream)
        full = user_traceback(exc.__cause__, full=True)
        redact_text = getattr(exc, "redact_text", None) or DEFAULT_REDACTOR.text
        print(_indent(redact_text(full).rstrip()), file=stream)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _resume_command(args: argparse.Namespace, backend: str, exc: RunFailed) -> str:
    run_id = getattr(exc, "run_id", None) or args.run_id or _run_id_of(exc.receipt_path) or "<run id>"
    params = "".join(f" -p {shlex.quote(p)}" for p in args.param)
    return f"interlock run {shlex.quote(args.target)} --backend {backend}{params} --resume {run_id}"


def _run_id_of(receipt_path: str | None) -> str | None:
    if not receipt_path:
        return None
    try:
        return str(json.loads(Path(receipt_path).read_text()).get("run_id") or "") or None
    except (OSError, ValueError):
        return None


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM outside a step stops the run like Ctrl-C (inside one, the shim handles it)."""
    import signal

    from interlock.core.run.runtime import StopRequested

    def on_term(signum: int, frame: Any) -> None:
        raise StopRequested("SIGTERM")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_compile(args: argparse.Namespace) -> int:
    from interlock.core.backend.api import compile as compile_
    from interlock.core.backend.protocol import as_compiler, compile_options_for

    pipe = load_pipeline(args.target)
    # The backend's own flags (--project for flyte), then --option K=V; its options class reads them.
    options: dict[str, Any] = dict(args.compile_options)
    options.update(parse_option(o, "compile") for o in args.option)
    # A wrong backend or option fails here, before --out is created.
    compile_options_for(as_compiler(pipe.spec, get_backend(args.backend))[1], options)
    out = Path(args.out)
    writable_dir(out.parent if out.suffix else out, "--out")
    files = compile_(pipe, args.backend, args.out, **options)
    for f in files:
        print(f)
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from interlock.core.report import render
    from interlock.core.report.html_page import graph_page

    spec = load_pipeline(args.target).spec
    if args.html:  # a page to open offline: inline SVG, no scripts, no network
        out = Path(args.html)
        writable_dir(out.parent, "--html")
        out.write_text(graph_page(spec), encoding="utf-8")
        print(out)
        return 0
    print({"text": render.text, "mermaid": render.mermaid, "dot": render.dot, "html": graph_page}[args.format](spec))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from interlock.core.report.report_html import show

    workdir = Path(args.workdir) if args.workdir else default_workdir()
    print(show(args.run_id, workdir, Path(args.out) if args.out else None))
    return 0


def cmd_spec(args: argparse.Namespace) -> int:
    print(load_pipeline(args.target).spec.dumps(indent=2))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from interlock.core.record.runs_list import format_runs, list_runs

    rows = list_runs(Path(args.workdir) if args.workdir else default_workdir(), limit=args.limit)
    if args.json:
        print(json.dumps([{**r.__dict__, "receipt": str(r.receipt) if r.receipt else None} for r in rows], indent=2))
    else:
        print(format_runs(rows))
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    # The provider is a plugin found by entry point (main loads it before parsing, so that
    # its own options are known); core only resolves the work directory.
    provider: LineageProvider = args.lineage_provider
    args.workdir = Path(args.workdir) if args.workdir else default_workdir()
    from interlock.core.record.lineage_record import flush_pending

    flush_pending(provider, args.workdir)  # runs il.run kept for recording (core/record/lineage_record.py)
    print(provider.run_cli(args))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("interlock")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


def build_parser(
    lineage: LineageProvider | None = None, compile_options: type[BackendOptions] | None = None
) -> argparse.ArgumentParser:
    """The parser; ``lineage``: the provider whose options ``interlock lineage`` takes;
    ``compile_options``: the named backend's, each also a flag of ``interlock compile``."""
    p = argparse.ArgumentParser(prog="interlock", description="Write a training pipeline once; run it on Flyte or KFP.")
    p.add_argument("--version", action="version", version=f"interlock {_version()}")
    sub = p.add_subparsers(dest="verb", required=True)

    b = sub.add_parser("backends", help="list installed backends and what each supports")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_backends)

    r = sub.add_parser("run", help="run a pipeline: FILE_OR_MODULE[:PIPELINE]", add_help=False,
                       usage="interlock run FILE_OR_MODULE[:PIPELINE] [options]")
    r.add_argument("target", nargs="?", help="the pipeline; with --help, its parameters are listed")
    r.add_argument("-h", "--help", action="store_true", help="show this help and the pipeline's parameters")
    r.add_argument("--backend", "-b", default=None, help=f"default: ${EnvName.BACKEND} or {DEFAULT_BACKEND}")
    r.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--workdir", default=None, help="run state, caches and receipts (default .interlock)")
    r.add_argument("--run-id", default=None, help="1-20 of a-z 0-9 '-', starting with a letter; reusing one resumes that run")
    r.add_argument(
        "--resume", default=None, metavar="RUN_ID",
        help="run an earlier run again: clear its stop markers, keep its checkpoints, cache and finished steps",
    )
    r.add_argument("--no-cache", action="store_true")
    r.add_argument(
        "--checkpoint-store", default=None, metavar="URI",
        help=f"where steps keep checkpoints: a directory or s3://bucket/prefix (default: ${EnvName.CHECKPOINT_ROOT}, "
        "else the run's folder)",
    )
    r.add_argument(
        "--pushgateway", default=None, metavar="HOST:PORT",
        help="push each step's and the run's metrics to this Prometheus Pushgateway (default: "
        "$INTERLOCK_PUSHGATEWAY; off when unset; docs/metrics.md)",
    )
    r.add_argument("--debug", action="store_true", help="on failure, print the whole traceback")
    r.add_argument("--verbose", "-v", action="store_true",
                   help="also show what libraries print (kfp's executor log, flytekit, MLflow's INFO lines)")
    r.add_argument("--heartbeat", type=float, default=HEARTBEAT_S, metavar="SECONDS",
                   help=f"a line for a step silent this long (default {HEARTBEAT_S:g})")
    r.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="a run option of the backend (`interlock backends` lists them)",
    )
    r.set_defaults(func=cmd_run, parser=r)

    c = sub.add_parser("compile", help="compile a pipeline for a backend",
                       epilog="with --backend NAME, --help also lists that backend's compile options as flags")
    c.add_argument("target")
    c.add_argument("--backend", "-b", required=True)
    c.add_argument("--out", "-o", required=True)
    c.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a compile option of the backend (`interlock backends` lists them)")
    _add_option_flags(c, compile_options)
    c.set_defaults(func=cmd_compile)

    g = sub.add_parser("graph", help="show the DAG")
    g.add_argument("target")
    g.add_argument("--format", choices=("text", "mermaid", "dot", "html"), default="text")
    g.add_argument("--html", metavar="OUT", help="write the graph as a self-contained HTML page (opens offline)")
    g.set_defaults(func=cmd_graph)

    sh = sub.add_parser("show", help="write a run's report (graph by outcome, timeline, curves, cost) and print its path")
    sh.add_argument("run_id")
    sh.add_argument("--workdir", default=None, help="the work directory the run ran in (default .interlock)")
    sh.add_argument("--out", "-o", default=None, help="where to write the page (default: report.html next to the receipt)")
    sh.set_defaults(func=cmd_show)

    s = sub.add_parser("spec", help="print the PipelineSpec as JSON")
    s.add_argument("target")
    s.set_defaults(func=cmd_spec)

    rs = sub.add_parser("runs", help="past runs in the work directory: status, duration, cost")
    rs.add_argument("--workdir", default=None, help="the work directory (default .interlock)")
    rs.add_argument("--limit", type=int, default=20, help="newest N runs (0: all)")
    rs.add_argument("--json", action="store_true")
    rs.set_defaults(func=cmd_runs)

    about = "upstream lineage of a model URI or run id"
    lin = sub.add_parser("lineage", help=about + (f" ({lineage.title})" if lineage else ""))
    lin.add_argument("target", nargs="?", help="a model URI or a run id")
    lin.add_argument("--workdir", default=None, help="the work directory whose runs to look up (default .interlock)")
    if lineage is not None:
        lineage.add_cli_options(lin)
    lin.set_defaults(func=cmd_lineage, lineage_provider=lineage)
    add_trigger_parsers(sub)
    return p


class _OptionFlag(argparse.Action):
    """A backend's compile option given as its own flag: kept with the others, as text."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        namespace.compile_options = {**getattr(namespace, "compile_options", {}), self.dest: values}


def _add_option_flags(parser: argparse.ArgumentParser, options: type[BackendOptions] | None) -> None:
    """Each of the backend's compile options as a flag (``--project P`` for ``--option project=P``)."""
    parser.set_defaults(compile_options={})
    if options is None:
        return
    for name in options.names():
        try:
            parser.add_argument("--" + name.replace("_", "-"), dest=name, action=_OptionFlag, default=argparse.SUPPRESS,
                                metavar="VALUE", help=f"the backend's compile option {name} (or --option {name}=VALUE)")
        except argparse.ArgumentError:  # a flag of the verb itself (--out): only as --option NAME=VALUE
            pass


def _compile_options_named(argv: list[str]) -> type[BackendOptions] | None:
    """The compile options of the backend ``interlock compile ... --backend NAME`` names, if it loads."""
    name = None
    for i, arg in enumerate(argv):
        if arg in ("--backend", "-b") and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--backend="):
            name = arg.partition("=")[2]
    if name is None:
        return None
    try:
        return get_backend(name).capabilities().compile_options
    except InterlockError:  # cmd_compile reports it, with the parser's other errors first
        return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # Only `interlock lineage` loads the lineage plugin: it brings that verb's options; and
        # only `interlock compile` the named backend: its compile options become flags.
        provider = lineage_provider() if argv[:1] == ["lineage"] else None
        compile_options = _compile_options_named(argv) if argv[:1] == ["compile"] else None
        args = build_parser(provider, compile_options).parse_args(argv)
        return int(args.func(args))
    except InterlockError as exc:
        print(f"interlock: error [{exc.code}]: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, PipelineDefinitionError | BackendNotFound) else EXIT_FAILED
    except OSError as exc:  # a disk or a permission problem outside any step: one line, no traceback
        print(f"interlock: error [OS]: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
