"""``interlock runs``: the runs in a work directory, newest first, from their receipts.

A run without a receipt is still running (its folder is locked) or was killed before it
could write one; both are listed, so nothing a person started is invisible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from interlock.core.base.errors import RecordError
from interlock.core.record.run_data import load_receipt
from interlock.core.run.env import state_dir_of
from interlock.core.run.state import LOCK_FILE, RunState


@dataclass(frozen=True)
class RunRow:
    run_id: str
    pipeline: str
    backend: str
    status: str
    started: float | None
    duration_s: float | None
    cost_usd: float | None
    receipt: Path | None
    problem: str | None = None  # why its receipt could not be read (the file named)


def list_runs(workdir: Path, limit: int | None = None) -> list[RunRow]:
    runs = Path(workdir) / "runs"
    rows = [_row(d) for d in runs.iterdir() if (d / "state").is_dir()] if runs.is_dir() else []
    rows.sort(key=lambda r: r.started or 0.0, reverse=True)
    return rows[:limit] if limit else rows


def _row(run_dir: Path) -> RunRow:
    state = RunState(state_dir_of(run_dir), run_dir.name)
    try:
        receipt = load_receipt(state.receipt_path)
    except RecordError as exc:  # one bad file hides no other run
        started = state.state_dir.stat().st_mtime
        return RunRow(run_dir.name, "?", "?", "unreadable", started, None, None, state.receipt_path, exc.message)
    running = (run_dir / LOCK_FILE).exists() and _locked(run_dir / LOCK_FILE)
    if receipt is None or running:  # a resumed run's old receipt is not its state now
        started = state.state_dir.stat().st_mtime
        return RunRow(run_dir.name, str((receipt or {}).get("pipeline", "?")), str((receipt or {}).get("backend", "?")),
                      "running" if running else "no receipt (killed?)", started, None, None, None)
    started, ended = receipt.get("started"), receipt.get("ended")
    duration = ended - started if isinstance(started, int | float) and isinstance(ended, int | float) else None
    return RunRow(run_dir.name, str(receipt.get("pipeline", "?")), str(receipt.get("backend", "?")),
                  str(receipt.get("status", "?")), started, duration,
                  (receipt.get("totals") or {}).get("estimated_cost_usd"), state.receipt_path)


def _locked(lock: Path) -> bool:
    """True while a run holds its folder's lock (fcntl lock: released when its process dies)."""
    import fcntl

    try:
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def format_runs(rows: list[RunRow]) -> str:
    if not rows:
        return "no runs yet"
    lines = [f"{'RUN ID':<22} {'PIPELINE':<20} {'BACKEND':<12} {'STATUS':<12} {'STARTED':<19} {'DURATION':>9} {'COST':>10}"]
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started)) if r.started else "?"
        duration = f"{r.duration_s:.1f}s" if r.duration_s is not None else "-"
        cost = f"${r.cost_usd:.4f}" if isinstance(r.cost_usd, int | float) else "-"
        lines.append(f"{r.run_id:<22} {r.pipeline:<20} {r.backend:<12} {r.status:<12} {started:<19} {duration:>9} {cost:>10}")
    lines.extend(f"\n{r.run_id}: {r.problem}" for r in rows if r.problem)
    return "\n".join(lines)
