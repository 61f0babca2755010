"""``interlock watch``, ``interlock triggers check`` and ``interlock triggers apply``.

watch: evaluate the pipeline's triggers in a loop (or ``--once``) and start the runs they ask
for on a local backend, one line per start naming its cause. check: what would start now and
why, and what would not (not due, already seen, no drift, with the figures), starting nothing.
apply: hand a compile backend whose triggers live on the platform (KFP's recurring runs) the
compiled pipeline, so that it creates them there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from interlock.core.backend.protocol import DEFAULT_BACKEND, TriggerApplier, get_backend
from interlock.core.base.errors import PolicyError
from interlock.core.dsl.loader import load_pipeline
from interlock.core.model.triggers import parse_time
from interlock.core.run.env import EnvName


def _params(args: argparse.Namespace, spec: Any) -> dict[str, Any]:
    from interlock.core.cli.main import parse_param

    return dict(parse_param(p, spec) for p in args.param)


def cmd_watch(args: argparse.Namespace) -> int:
    from interlock.core.cli.main import parse_option
    from interlock.core.report.console import RunConsole
    from interlock.core.watch.watcher import Watcher

    pipe = load_pipeline(args.target)
    options = dict(parse_option(o) for o in args.option)
    watcher = Watcher(pipe, args.backend, workdir=args.workdir, params=_params(args, pipe.spec),
                      out=lambda line: print(line, flush=True), progress=RunConsole(verbose=args.verbose),
                      options=options or None)
    triggers = ", ".join(t.label(i) for i, t in enumerate(pipe.spec.triggers))
    print(f"interlock watch: {pipe.spec.name} on {watcher.backend}: {triggers}; state {watcher.path}", file=sys.stderr)
    try:
        started = watcher.watch(evaluations=1 if args.once else None)
    except KeyboardInterrupt:
        print("\ninterlock watch: stopped", file=sys.stderr)
        return 0
    if args.once:
        print(f"interlock watch: {len(started)} run(s) started", file=sys.stderr)
    return 1 if any(s.status == "failed" for s in started) else 0


def cmd_check(args: argparse.Namespace) -> int:
    from interlock.core.watch.watcher import Watcher

    pipe = load_pipeline(args.target)
    watcher = Watcher(pipe, workdir=args.workdir, params=_params(args, pipe.spec))
    at = parse_time(args.at, "--at") if args.at else None
    decision = watcher.check(at)
    for v in decision.verdicts:
        head = f"would start {v.starts} run(s)" if v.starts else "would not start"
        print(watcher.redact.text(f"{v.trigger} ({v.kind}): {head}: {v.why}"))
    for s in decision.starts:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(s.params.items()))
        print(watcher.redact.text(f"  {s.trigger}: {s.cause.summary()}" + (f"; parameters {shown}" if shown else "")))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from interlock.core.backend.api import compile as compile_
    from interlock.core.backend.protocol import as_compiler, compile_options_for
    from interlock.core.cli.main import parse_option

    pipe = load_pipeline(args.target)
    backend = get_backend(args.backend)
    if not isinstance(backend, TriggerApplier):
        raise PolicyError(
            f"backend {args.backend!r} keeps no triggers on the platform to apply",
            hint=f"its compiled files already carry the triggers: interlock compile {args.target} --backend {args.backend}",
        )
    options = compile_options_for(as_compiler(pipe.spec, backend)[1], dict(parse_option(o, "compile") for o in args.option))
    with tempfile.TemporaryDirectory(prefix="interlock-apply-") as tmp:
        if args.compiled:
            compiled = Path(args.compiled)
            if not compiled.is_dir():
                raise PolicyError(f"--compiled {compiled} is not a folder", hint="the --out folder of interlock compile")
        else:
            compiled = Path(args.out) if args.out else Path(tmp)
            compile_(pipe, args.backend, compiled, options=options)
        for line in backend.apply_triggers(pipe.spec, compiled, options):
            print(line)
    return 0


def add_parsers(sub: Any) -> None:
    w = sub.add_parser("watch", help="evaluate a pipeline's triggers and start the runs they ask for, here")
    w.add_argument("target", help="the pipeline: FILE_OR_MODULE[:PIPELINE]")
    w.add_argument("--backend", "-b", default=None, help=f"a run backend (default: ${EnvName.BACKEND} or {DEFAULT_BACKEND})")
    w.add_argument("--once", action="store_true", help="evaluate once, start what is due, and exit")
    w.add_argument("--workdir", default=None, help="runs and the watch state (default .interlock)")
    w.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter every run gets (a trigger's inputs win)")
    w.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a run option of the backend")
    w.add_argument("--verbose", "-v", action="store_true")
    w.set_defaults(func=cmd_watch)

    t = sub.add_parser("triggers", help="check what a pipeline's triggers would start, or apply them on a platform")
    tsub = t.add_subparsers(dest="triggers_verb", required=True)
    c = tsub.add_parser("check", help="what would start now and why, without starting anything")
    c.add_argument("target")
    c.add_argument("--at", default=None, metavar="ISO_TIME", help="evaluate at this time instead of now")
    c.add_argument("--workdir", default=None, help="where the watch state is (default .interlock)")
    c.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    c.set_defaults(func=cmd_check)
    a = tsub.add_parser("apply", help="create or update the triggers on the platform (KFP recurring runs)")
    a.add_argument("target")
    a.add_argument("--backend", "-b", required=True)
    a.add_argument("--out", "-o", default=None, help="compile into this folder (default: a temporary one)")
    a.add_argument("--compiled", default=None, metavar="DIR", help="use this compile output instead of compiling")
    a.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a compile option of the backend")
    a.set_defaults(func=cmd_apply)

