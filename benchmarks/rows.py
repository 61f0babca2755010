"""The row convention every benchmark script follows, so that run_all.py can collect them.

A script is runnable as ``python benchmarks/NAME.py [--sizes a,b,c] [--json PATH]``; it prints a
table and the command that produced it, and with ``--json PATH`` writes a list of rows::

    {"figure": str, "size": int, "interlock_s": float, "native_s": float | null,
     "ratio": float | null, "note": str}

one per figure and size, in seconds for that size. Scripts import this module from their own
folder (``python benchmarks/x.py`` puts ``benchmarks/`` first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Row:
    figure: str
    size: int
    interlock_s: float
    native_s: float | None = None
    ratio: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None and self.native_s:
            self.ratio = self.interlock_s / self.native_s


def add_arguments(parser: argparse.ArgumentParser, default_sizes: str) -> None:
    """``--sizes`` and ``--json``, the two options run_all.py passes to every script."""
    parser.add_argument("--sizes", default=default_sizes, help=f"comma-separated sizes (default {default_sizes})")
    parser.add_argument("--json", metavar="PATH", default=None, help="also write the rows as JSON to PATH")


def sizes(text: str) -> list[int]:
    try:
        out = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--sizes takes comma-separated integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise SystemExit(f"--sizes needs at least one size, each at least 1 (got {text!r})")
    return out


def command(argv: list[str] | None = None) -> str:
    """The command line that produced the output, as a user would type it."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd())
    except ValueError:
        pass
    return shlex.join(["python", str(script), *(sys.argv[1:] if argv is None else argv)])


def report(rows: list[Row], json_path: str | None, argv: list[str] | None = None) -> None:
    """Print the table and the command; write the JSON rows when asked."""
    print(f"command: {command(argv)}")
    print(table(rows))
    if json_path:
        write_json(rows, json_path)


def write_json(rows: list[Row], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")


def table(rows: list[Row]) -> str:
    head = f"{'figure':<34} {'size':>6} {'interlock':>10} {'native':>10} {'ratio':>7}  note"
    lines = [head, "-" * len(head)]
    for r in rows:
        native = f"{r.native_s:.3f}s" if r.native_s is not None else "-"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        lines.append(f"{r.figure:<34} {r.size:>6} {r.interlock_s:>9.3f}s {native:>10} {ratio:>7}  {r.note}")
    return "\n".join(lines)
