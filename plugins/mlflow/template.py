"""A fresh SQLite store, created once per MLflow version instead of once per store.

MLflow builds a new SQLite store by running every one of its schema migrations (about 60
alembic steps): seconds (14 s on a busy 2-core machine), paid by the first run in every
new work directory and by every test that uses a temporary store. The result is the same
file each time. So the first store this machine creates is copied, empty, to
``$INTERLOCK_HOME/mlflow/empty-store-mlflow-<version>.db`` (default
``~/.cache/interlock``), and a new store starts as a copy of it: the schema is already at
head, MLflow checks it and runs nothing. The copy's ``Default`` experiment is pointed at
the store's own artifact folder. A template that is not a readable store at a known
revision is ignored (MLflow then migrates as usual); ``INTERLOCK_MLFLOW_TEMPLATE=0`` turns
the template off.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from pathlib import Path

HOME_ENV = "INTERLOCK_HOME"
TEMPLATE_ENV = "INTERLOCK_MLFLOW_TEMPLATE"  # "0": never use or write a template


def enabled() -> bool:
    return os.environ.get(TEMPLATE_ENV, "1") not in ("0", "false", "no")


def template_path() -> Path:
    import mlflow

    home = Path(os.environ.get(HOME_ENV) or Path.home() / ".cache" / "interlock")
    # One MLflow version has one schema head: the version names the template.
    return home / "mlflow" / f"empty-store-mlflow-{mlflow.__version__}.db"


def _revision(db: Path) -> str | None:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def seed(db: Path, artifact_root: str | None) -> bool:
    """Start the missing store ``db`` as a copy of the template; True when it did."""
    if not enabled() or (db.exists() and db.stat().st_size > 0):
        return False
    try:
        template = template_path()
        if not template.is_file() or _revision(template) is None:
            return False
        db.parent.mkdir(parents=True, exist_ok=True)
        tmp = db.with_name(f".{db.name}.{uuid.uuid4().hex}.tmp")
        shutil.copyfile(template, tmp)
        if artifact_root:
            with sqlite3.connect(tmp) as conn:
                conn.execute(
                    "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                    (f"{artifact_root.rstrip('/')}/0",),
                )
        os.replace(tmp, db)
    except (OSError, sqlite3.Error, ImportError):
        return False
    return True


def save(db: Path) -> None:
    """Keep the store MLflow just created (still empty) as the template, when there is none."""
    if not enabled():
        return
    try:
        template = template_path()
        if template.is_file() or _revision(db) is None:
            return
        template.parent.mkdir(parents=True, exist_ok=True)
        tmp = template.with_name(f".{template.name}.{uuid.uuid4().hex}.tmp")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as src, sqlite3.connect(tmp) as dst:
            src.backup(dst)  # a consistent copy, even of a store in WAL mode
        os.replace(tmp, template)
    except (OSError, sqlite3.Error, ImportError):
        return
