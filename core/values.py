"""Moving values across step boundaries: JSON, parquet and directories. Never pickle.

Each port's value lives in its own directory, so every backend can move it as one blob
(a Flyte directory, a KFP artifact) and read it back the same way. pandas and pyarrow are
imported only when a DataFrame actually crosses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

from .artifacts import Dataset, Metrics, Model
from .errors import SerializationError
from .types import TypeSpec, value_matches

VALUE_FILE = "value.json"
FRAME_FILE = "data.parquet"
METRICS_FILE = "metrics.json"
ARTIFACT_META = ".interlock-artifact.json"


# -- JSON form ---------------------------------------------------------------------------
def to_jsonable(value: Any, t: TypeSpec) -> Any:
    if value is None:
        return None
    if t.kind == "dataclass":
        return {name: to_jsonable(getattr(value, name), ft) for name, ft in t.fields}
    if t.kind == "list":
        return [to_jsonable(v, t.args[0]) if t.args else v for v in value]
    if t.kind == "dict":
        return {k: (to_jsonable(v, t.args[1]) if t.args else v) for k, v in value.items()}
    if t.kind == "metrics":
        return dict(value)
    if t.kind == "float":
        return float(value)
    return value


def from_jsonable(data: Any, t: TypeSpec) -> Any:
    if data is None:
        return None
    if t.kind == "dataclass":
        if dataclasses.is_dataclass(data):
            return data
        cls = t.resolve_class()
        return cls(**{name: from_jsonable(data.get(name), ft) for name, ft in t.fields if name in data})
    if t.kind == "list":
        return [from_jsonable(v, t.args[0]) if t.args else v for v in data]
    if t.kind == "dict":
        return {k: (from_jsonable(v, t.args[1]) if t.args else v) for k, v in data.items()}
    if t.kind == "float":
        return float(data)
    if t.kind == "metrics":
        return Metrics(data)
    return data


def check_output(value: Any, t: TypeSpec, where: str) -> None:
    """Refuse a returned value that does not match the declared type, naming the step and port."""
    ok: bool
    if value is None:
        ok = t.optional or t.kind == "none"
    elif t.kind == "dataframe":
        ok = type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")
    elif t.kind == "dataset":
        ok = isinstance(value, Dataset)
    elif t.kind == "model":
        ok = isinstance(value, Model)
    elif t.kind == "metrics":
        ok = isinstance(value, Metrics) or (
            isinstance(value, dict) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value.values())
        )
    else:
        ok = value_matches(value, t)
    if not ok:
        raise SerializationError(f"{where}: returned {type(value).__name__} {_short(value)}, declared {t.describe()}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- files -------------------------------------------------------------------------------
def write_value(value: Any, t: TypeSpec, dest: str | Path) -> None:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if value is None:
        (dest / VALUE_FILE).write_text("null")
    elif t.kind == "dataframe":
        try:
            value.to_parquet(dest / FRAME_FILE, index=True)
        except Exception as exc:  # pyarrow raises many types; the port is what matters here
            raise SerializationError(f"cannot write DataFrame as parquet: {exc}") from exc
    elif t.kind in ("dataset", "model"):
        src = Path(value.path)
        if src.resolve() != dest.resolve():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        (dest / ARTIFACT_META).write_text(json.dumps({"kind": t.kind, "metadata": value.metadata}, sort_keys=True))
    elif t.kind == "metrics":
        (dest / METRICS_FILE).write_text(json.dumps(dict(value), sort_keys=True))
    else:
        try:
            text = json.dumps(to_jsonable(value, t), sort_keys=True, allow_nan=True)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"value of type {t.describe()} is not JSON-able: {exc}") from exc
        (dest / VALUE_FILE).write_text(text)


def read_value(t: TypeSpec, src: str | Path) -> Any:
    src = Path(src)
    if (src / VALUE_FILE).exists():
        data = json.loads((src / VALUE_FILE).read_text())
        if data is None or not t.is_artifact:
            return from_jsonable(data, t)
    if t.kind == "dataframe":
        import pandas as pd

        path = src / FRAME_FILE
        if not path.exists():
            raise SerializationError(f"no {FRAME_FILE} in {src}")
        return pd.read_parquet(path)
    if t.kind in ("dataset", "model"):
        meta_path = src / ARTIFACT_META
        meta = json.loads(meta_path.read_text())["metadata"] if meta_path.exists() else {}
        return (Model if t.kind == "model" else Dataset)(src, meta)
    if t.kind == "metrics":
        return Metrics(json.loads((src / METRICS_FILE).read_text()))
    raise SerializationError(f"no {VALUE_FILE} in {src}")


# -- hashing (cache keys) -----------------------------------------------------------------
def _canonical_json(data: Any) -> bytes:
    def norm(x: Any) -> Any:
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return repr(x)
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [norm(v) for v in x]
        return x

    return json.dumps(norm(data), sort_keys=True, separators=(",", ":")).encode()


def dataframe_hash(df: Any) -> str:
    """Content hash of a DataFrame: columns, dtypes, index and every value (not object identity)."""
    import pandas as pd

    h = hashlib.sha256()
    h.update(_canonical_json([list(map(str, df.columns)), [str(d) for d in df.dtypes]]))
    h.update(pd.util.hash_pandas_object(df, index=True).values.tobytes())
    return h.hexdigest()


def directory_hash(path: str | Path) -> str:
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ARTIFACT_META):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def value_hash(value: Any, t: TypeSpec) -> str:
    if value is None:
        return hashlib.sha256(b"null").hexdigest()
    if t.kind == "dataframe":
        return dataframe_hash(value)
    if t.kind in ("dataset", "model"):
        h = hashlib.sha256(directory_hash(value.path).encode())
        h.update(_canonical_json(value.metadata))
        return h.hexdigest()
    return hashlib.sha256(_canonical_json(to_jsonable(value, t))).hexdigest()
