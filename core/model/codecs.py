"""One codec per value kind: the only table in core that says how a kind of value behaves.

Every portable value has a ``TypeKind``. Its ``Codec`` row says, for that kind: how the type
reads in a message, which Python annotation means it, whether a value fits it, its JSON
form and back, how it is written to and read from a port's directory between steps, its
content hash (cache keys), how a command line spells it, and how a value still in its JSON
form becomes the declared value. Everything else in core (``types``, ``values``, ``cache``,
``backends``, ``cli``) dispatches through ``codec(t)``; adapters keep their own one-row-per-
kind tables and call back into these rows where they need the file format. Adding a kind is
one ``TypeKind`` member plus one row here (and one row per adapter table).

pandas is imported only inside the dataframe row's functions, when a DataFrame crosses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Callable, Iterable
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import SerializationError
from interlock.core.model.artifacts import Dataset, Metrics, Model

if TYPE_CHECKING:
    from interlock.core.model.types import TypeSpec

# Files inside a port's directory.
VALUE_FILE = "value.json"  # any JSON value, and the null marker of every kind
FRAME_FILE = "data.parquet"
METRICS_FILE = "metrics.json"
ARTIFACT_META = ".interlock-artifact.json"


class TypeKind(StrEnum):
    """What kind of value a port carries. The values are the spelling in a spec's JSON."""

    INT = "int"
    FLOAT = "float"
    STR = "str"
    BOOL = "bool"
    NONE = "none"
    LIST = "list"
    DICT = "dict"
    DATACLASS = "dataclass"
    DATAFRAME = "dataframe"
    DATASET = "dataset"
    MODEL = "model"
    METRICS = "metrics"
    ARTIFACTS = "artifacts"  # a list of artifacts (list[il.Dataset], list[pd.DataFrame]...): files


def _as_is(value: Any, t: TypeSpec) -> Any:
    return value


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class Codec:
    """Everything core does with values of one kind. Functions never see None: the dispatchers
    below handle it once for every kind (an Optional port's None is ``null`` everywhere).

    A row of the table below, read-only once made.

    kind: the TypeKind. describe: the type as a person reads it (no Optional[]). matches: does
    a (returned) value fit the type. write / read: the value into a port's directory and back.
    hash: content hash, for cache keys. artifact: a value of this kind moves as files (never a
    constant, a parameter or plain JSON). recognizes: a leaf annotation that means this kind
    (None: structural, recognised by types.type_of). to_jsonable / from_jsonable: the JSON
    form and back (None: no JSON form; the value only crosses as files). parse: how a command
    line spells a value (`-p key=value`). revive: a value that may still be in its JSON form
    (a default, a -p value, a constant) as the value the step declared; only kinds whose JSON
    form is a different Python type need it. json_problem: why a JSON value cannot become this
    type, member by member (None: it does not match).
    """

    kind: TypeKind
    describe: Callable[[TypeSpec], str]
    matches: Callable[[Any, TypeSpec], bool]
    write: Callable[[Any, TypeSpec, Path], None]
    read: Callable[[TypeSpec, Path], Any]
    hash: Callable[[Any, TypeSpec], str]
    artifact: bool = False
    recognizes: Callable[[Any], bool] | None = None
    to_jsonable: Callable[[Any, TypeSpec], Any] | None = None
    from_jsonable: Callable[[Any, TypeSpec], Any] | None = None
    parse: Callable[[str], Any] = json.loads
    revive: Callable[[Any, TypeSpec], Any] = _as_is
    json_problem: Callable[[Any, TypeSpec, str], str | None] | None = None

    def __repr__(self) -> str:  # the functions' reprs say nothing a reader needs
        return f"Codec({self.kind!r})"

    @property
    def has_json(self) -> bool:
        return self.to_jsonable is not None


# -- dispatchers (None handled here, once) -----------------------------------------------------
def codec(t: TypeSpec | TypeKind) -> Codec:
    """The row for a type (or a kind)."""
    return CODECS[t if isinstance(t, TypeKind) else t.kind]


def value_matches(value: Any, t: TypeSpec) -> bool:
    """Does a constant (a default or a literal wired into a step) fit ``t``? Artifacts never do."""
    if value is None:
        return t.optional or t.kind is TypeKind.NONE
    c = codec(t)
    return not c.artifact and c.matches(value, t)


def output_matches(value: Any, t: TypeSpec) -> bool:
    """Does a value a step returned fit ``t``? Artifacts too."""
    if value is None:
        return t.optional or t.kind is TypeKind.NONE
    return codec(t).matches(value, t)


def to_jsonable(value: Any, t: TypeSpec) -> Any:
    if value is None:
        return None
    c = codec(t)
    return c.to_jsonable(value, t) if c.to_jsonable else value


def from_jsonable(data: Any, t: TypeSpec) -> Any:
    if data is None:
        return None
    c = codec(t)
    return c.from_jsonable(data, t) if c.from_jsonable else data


def revive(value: Any, t: TypeSpec) -> Any:
    """A value that may be in its JSON form (a dataclass as its JSON object) as the declared value."""
    return None if value is None else codec(t).revive(value, t)


def json_problem(value: Any, t: TypeSpec, where: str) -> str | None:
    """Why a JSON value cannot become type ``t`` (objects stand for dataclasses); None if it can."""
    c = codec(t)
    if value is not None and c.json_problem is not None:
        return c.json_problem(value, t, where)
    return _leaf_problem(value, t, where)


def _leaf_problem(value: Any, t: TypeSpec, where: str) -> str | None:
    if value_matches(value, t):
        return None
    return f"{where}={value!r} ({type(value).__name__}) does not fit {t.describe()}"


def _first_problem(items: Iterable[tuple[str, Any, TypeSpec]]) -> str | None:
    return next((p for p in (json_problem(v, ft, w) for w, v, ft in items) if p), None)


# -- shared pieces -----------------------------------------------------------------------------
def _name(text: str) -> Callable[[TypeSpec], str]:
    return lambda t: text


def qualname(tp: type) -> str:
    """How a spec names a class: "module:Qualname"."""
    return f"{tp.__module__}:{tp.__qualname__}"


def _is(tp: Any) -> Callable[[Any], bool]:
    return lambda annotation: annotation is tp


def _subclass_of(tp: type) -> Callable[[Any], bool]:
    return lambda annotation: isinstance(annotation, type) and issubclass(annotation, tp)


def _same(value: Any, t: TypeSpec) -> Any:
    return value


def canonical_json(data: Any) -> bytes:
    """Stable bytes for hashing: sorted keys, no spaces, NaN/inf spelled out."""

    def norm(x: Any) -> Any:
        if isinstance(x, float) and not x - x == 0:  # nan, inf (math.isfinite without math)
            return repr(x)
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [norm(v) for v in x]
        return x

    return json.dumps(norm(data), sort_keys=True, separators=(",", ":")).encode()


def json_text(value: Any, t: TypeSpec) -> str:
    """The text of a value's ``value.json`` (also what il.map passes in memory)."""
    try:
        # Keys in the value's order: the next step gets the dict the step returned (hashes
        # use canonical_json, so the order does not change a cache key).
        return json.dumps(to_jsonable(value, t), allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"value of type {t.describe()} is not JSON-able: {exc}") from exc


def _write_json(value: Any, t: TypeSpec, dest: Path) -> None:
    (dest / VALUE_FILE).write_text(json_text(value, t))


def _read_json(t: TypeSpec, src: Path) -> Any:
    path = src / VALUE_FILE
    if not path.exists():
        raise SerializationError(f"no {VALUE_FILE} in {src}")
    return from_jsonable(json.loads(path.read_text()), t)


def _hash_json(value: Any, t: TypeSpec) -> str:
    return hashlib.sha256(canonical_json(to_jsonable(value, t))).hexdigest()


def _json_row(kind: TypeKind, **kw: Any) -> Codec:
    """A kind whose value is plain JSON: value.json between steps, hashed by its JSON form."""
    kw.setdefault("to_jsonable", _same)
    kw.setdefault("from_jsonable", _same)
    kw.setdefault("describe", _name(kind.value))
    return Codec(kind, write=_write_json, read=_read_json, hash=_hash_json, **kw)


# -- scalars -----------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int_from_json(data: Any, t: TypeSpec) -> Any:
    # JSON numbers may come back as floats (protobuf Struct turns 3 into 3.0): where an int is
    # declared, an integral float is that int. Anything else is left for the type check.
    return int(data) if isinstance(data, float) and data.is_integer() else data


# -- Literal and Enum ports: a str, int or bool kind with ``choices`` (and, for an Enum, its
# class as ``name``). The value crosses as its JSON scalar; a step gets the Enum member.
def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _scalar(kind: TypeKind, base: Callable[[Any], bool], from_json: Callable[[Any, TypeSpec], Any] = lambda v, t: v,
            **kw: Any) -> Codec:
    def matches(v: Any, t: TypeSpec) -> bool:
        plain = _plain(v)
        return base(plain) and (not t.choices or plain in t.choices)

    def describe(t: TypeSpec) -> str:
        if t.name:
            return t.name.rsplit(":", 1)[-1]
        if t.choices:
            return f"Literal[{', '.join(repr(c) for c in t.choices)}]"
        return kind.value

    def member(v: Any, t: TypeSpec) -> Any:
        v = from_json(_plain(v), t)
        return t.resolve_class()(v) if t.name else v

    return _json_row(kind, describe=describe, matches=matches, to_jsonable=lambda v, t: _plain(v),
                     from_jsonable=member, revive=lambda v, t: member(v, t) if t.name else v, **kw)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(text)
    return lowered in ("true", "1", "yes")


# -- list, dict, dataclass ---------------------------------------------------------------------
def _describe_list(t: TypeSpec) -> str:
    return f"list[{t.args[0].describe()}]" if t.args else "list"


def _list_matches(value: Any, t: TypeSpec) -> bool:
    return isinstance(value, list | tuple) and (not t.args or all(value_matches(v, t.args[0]) for v in value))


def _list_to_json(value: Any, t: TypeSpec) -> Any:
    return [to_jsonable(v, t.args[0]) if t.args else v for v in value]


def _list_from_json(data: Any, t: TypeSpec) -> Any:
    return [from_jsonable(v, t.args[0]) if t.args else v for v in data]


def _list_problem(value: Any, t: TypeSpec, where: str) -> str | None:
    if not (t.args and isinstance(value, list | tuple)):
        return _leaf_problem(value, t, where)
    return _first_problem((f"{where}[{i}]", v, t.args[0]) for i, v in enumerate(value))


def _describe_dict(t: TypeSpec) -> str:
    return f"dict[{t.args[0].describe()}, {t.args[1].describe()}]" if t.args else "dict"


def _dict_matches(value: Any, t: TypeSpec) -> bool:
    return isinstance(value, dict) and all(isinstance(key, str) for key in value) and (
        not t.args or all(value_matches(v, t.args[1]) for v in value.values())
    )


def _dict_to_json(value: Any, t: TypeSpec) -> Any:
    return {k: (to_jsonable(v, t.args[1]) if t.args else v) for k, v in value.items()}


def _dict_from_json(data: Any, t: TypeSpec) -> Any:
    return {k: (from_jsonable(v, t.args[1]) if t.args else v) for k, v in data.items()}


def _dict_problem(value: Any, t: TypeSpec, where: str) -> str | None:
    if not (t.args and isinstance(value, dict) and all(isinstance(k, str) for k in value)):
        return _leaf_problem(value, t, where)
    return _first_problem((f"{where}[{k!r}]", v, t.args[1]) for k, v in value.items())


def _describe_dataclass(t: TypeSpec) -> str:
    return (t.name or "dataclass").rsplit(":", 1)[-1]


def is_structured(value: Any) -> bool:
    """A dataclass instance or a pydantic model instance (duck-typed: core never imports pydantic)."""
    if isinstance(value, type):
        return False
    return dataclasses.is_dataclass(value) or hasattr(type(value), "model_fields")


def _dataclass_matches(value: Any, t: TypeSpec) -> bool:
    return is_structured(value) and qualname(type(value)) == t.name


def _dataclass_to_json(value: Any, t: TypeSpec) -> Any:
    return {name: to_jsonable(getattr(value, name), ft) for name, ft in t.fields}


def _dataclass_from_json(data: Any, t: TypeSpec) -> Any:
    if not isinstance(data, dict):  # already the dataclass (or pydantic model) itself
        return data
    cls = t.resolve_class()
    return cls(**{name: from_jsonable(data.get(name), ft) for name, ft in t.fields if name in data})


def _dataclass_revive(value: Any, t: TypeSpec) -> Any:
    return _dataclass_from_json(value, t) if isinstance(value, dict) else value


def _dataclass_problem(value: Any, t: TypeSpec, where: str) -> str | None:
    if not isinstance(value, dict):
        return _leaf_problem(value, t, where)
    fields = dict(t.fields)
    unknown = sorted(set(value) - set(fields))
    if unknown:
        return f"{where} has no field(s) {unknown}; fields are {list(fields)}"
    return _first_problem((f"{where}.{k}", v, fields[k]) for k, v in value.items())


# -- a dataclass or pydantic model with file fields (il.Dataset, il.Model, a DataFrame...) ------
FIELDS_DIR = "fields"  # a file field's value, in its own folder beside value.json
FILE_REF = "$file"  # what value.json holds in place of a file field


def file_fields(t: TypeSpec) -> tuple[str, ...]:
    """The fields of a dataclass or pydantic model type that move as files (an il.Dataset, an
    il.Model, a DataFrame, il.Metrics...), as a Flyte 2 model carries a flyte.io.File."""
    if t.kind is not TypeKind.DATACLASS:
        return ()
    return tuple(name for name, ft in t.fields if CODECS[ft.kind].artifact)


def _dataclass_write(value: Any, t: TypeSpec, dest: Path) -> None:
    files = file_fields(t)
    if not files:
        _write_json(value, t, dest)
        return
    data: dict[str, Any] = {}
    for name, ft in t.fields:
        v = getattr(value, name)
        if name in files and v is not None:  # its own folder, written by its kind's codec
            where = dest / FIELDS_DIR / name
            where.mkdir(parents=True, exist_ok=True)
            CODECS[ft.kind].write(v, ft, where)
            data[name] = {FILE_REF: name}
        else:
            data[name] = None if v is None else to_jsonable(v, ft)
    try:
        (dest / VALUE_FILE).write_text(json.dumps(data, allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"value of type {t.describe()} is not JSON-able: {exc}") from exc


def _dataclass_read(t: TypeSpec, src: Path) -> Any:
    files = file_fields(t)
    if not files:
        return _read_json(t, src)
    path = src / VALUE_FILE
    if not path.exists():
        raise SerializationError(f"no {VALUE_FILE} in {src}")
    data = json.loads(path.read_text())
    if data is None:
        return None
    kwargs: dict[str, Any] = {}
    for name, ft in t.fields:
        if name not in data:
            continue
        if name in files and data[name] is not None:
            kwargs[name] = CODECS[ft.kind].read(ft, src / FIELDS_DIR / name)
        else:
            kwargs[name] = from_jsonable(data[name], ft)
    return t.resolve_class()(**kwargs)


def _dataclass_hash(value: Any, t: TypeSpec) -> str:
    files = file_fields(t)
    if not files:
        return _hash_json(value, t)
    parts: dict[str, Any] = {}
    for name, ft in t.fields:  # a file field by its content, as the file kinds hash
        v = getattr(value, name)
        parts[name] = None if v is None else CODECS[ft.kind].hash(v, ft) if name in files else to_jsonable(v, ft)
    return hashlib.sha256(canonical_json(parts)).hexdigest()


# -- DataFrame: parquet ------------------------------------------------------------------------
def is_dataframe_type(tp: Any) -> bool:
    # Checked by name so that core never imports pandas.
    return isinstance(tp, type) and tp.__name__ == "DataFrame" and tp.__module__.startswith("pandas")


def write_parquet(df: Any, path: Path) -> None:
    """A DataFrame as one parquet file, index included (the format on every backend)."""
    try:
        df.to_parquet(path, index=True)
    except Exception as exc:  # pyarrow raises many types; the port is what matters here
        raise SerializationError(f"cannot write DataFrame as parquet: {exc}") from exc


def read_parquet(path: Path) -> Any:
    import pandas as pd

    return pd.read_parquet(path)


def _label(value: Any) -> list[str]:
    """A column or index label with its type: ``0`` and ``"0"`` are different columns."""
    return [type(value).__name__, str(value)]


def _dtype_record(dtype: Any) -> Any:
    """A dtype in full: a categorical's categories (with their type and order) and its
    ordered flag, which ``str(dtype)`` ("category") and the value hashes both leave out."""
    if getattr(dtype, "name", None) == "category":
        cats = dtype.categories
        return {"category": [_label(c) for c in cats], "of": str(cats.dtype), "ordered": bool(dtype.ordered)}
    return str(dtype)


def _index_record(index: Any) -> dict[str, Any]:
    levels = getattr(index, "levels", None)
    dtypes = [_dtype_record(lv.dtype) for lv in levels] if levels is not None else [_dtype_record(index.dtype)]
    return {"names": [_label(n) for n in index.names], "dtypes": dtypes}


def dataframe_hash(df: Any) -> str:
    """Content hash of a DataFrame: every value, and everything that gives the values their
    meaning: column labels with their types, dtypes in full (categories and their order,
    the ordered flag), and the index's names and dtypes. Not object identity."""
    import pandas as pd

    h = hashlib.sha256()
    h.update(canonical_json({
        "columns": [_label(c) for c in df.columns],
        "columns_index": _index_record(df.columns),
        "dtypes": [_dtype_record(d) for d in df.dtypes],
        "index": _index_record(df.index),
    }))
    h.update(pd.util.hash_pandas_object(df, index=True).values.tobytes())
    return h.hexdigest()


def _frame_write(value: Any, t: TypeSpec, dest: Path) -> None:
    write_parquet(value, dest / FRAME_FILE)


def _frame_read(t: TypeSpec, src: Path) -> Any:
    path = src / FRAME_FILE
    if not path.exists():
        raise SerializationError(f"no {FRAME_FILE} in {src}")
    return read_parquet(path)


# -- Dataset, Model: directories with metadata -------------------------------------------------
def directory_hash(path: str | Path) -> str:
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ARTIFACT_META):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _directory_row(kind: TypeKind, cls: type[Dataset] | type[Model], label: str) -> Codec:
    def write(value: Any, t: TypeSpec, dest: Path) -> None:
        src = Path(value.path)
        if src.resolve() != dest.resolve():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        (dest / ARTIFACT_META).write_text(json.dumps({"kind": kind.value, "metadata": value.metadata}, sort_keys=True))

    def read(t: TypeSpec, src: Path) -> Any:
        meta_path = src / ARTIFACT_META
        meta = json.loads(meta_path.read_text())["metadata"] if meta_path.exists() else {}
        return cls(src, meta)

    def content_hash(value: Any, t: TypeSpec) -> str:
        h = hashlib.sha256(directory_hash(value.path).encode())
        h.update(canonical_json(value.metadata))
        return h.hexdigest()

    return Codec(
        kind, describe=_name(label), matches=lambda value, t: isinstance(value, cls),
        write=write, read=read, hash=content_hash, artifact=True, recognizes=_subclass_of(cls),
    )


# -- Metrics: a JSON file of name -> number ----------------------------------------------------
def _metrics_matches(value: Any, t: TypeSpec) -> bool:
    return isinstance(value, Metrics) or (isinstance(value, dict) and all(_is_number(v) for v in value.values()))


def _metrics_write(value: Any, t: TypeSpec, dest: Path) -> None:
    (dest / METRICS_FILE).write_text(json.dumps(dict(value), sort_keys=True))


def _metrics_read(t: TypeSpec, src: Path) -> Any:
    return Metrics(json.loads((src / METRICS_FILE).read_text()))


# -- a list of artifacts: one sub-directory per element ---------------------------------------
ITEMS_FILE = "items.json"


def _artifacts_matches(value: Any, t: TypeSpec) -> bool:
    return isinstance(value, list | tuple) and all(output_matches(v, t.args[0]) for v in value)


def _artifacts_write(value: Any, t: TypeSpec, dest: Path) -> None:
    from interlock.core.model.values import write_value

    for i, v in enumerate(value):
        write_value(v, t.args[0], dest / str(i))
    (dest / ITEMS_FILE).write_text(json.dumps({"items": len(value)}))


def _artifacts_read(t: TypeSpec, src: Path) -> Any:
    from interlock.core.model.values import read_value

    path = src / ITEMS_FILE
    if not path.exists():
        raise SerializationError(f"no {ITEMS_FILE} in {src}")
    n = json.loads(path.read_text())["items"]
    return [read_value(t.args[0], src / str(i)) for i in range(n)]


def _artifacts_hash(value: Any, t: TypeSpec) -> str:
    from interlock.core.model.values import value_hash

    return hashlib.sha256(canonical_json([value_hash(v, t.args[0]) for v in value])).hexdigest()


# -- the table ---------------------------------------------------------------------------------
_ROWS = (
    _scalar(TypeKind.INT, lambda v: isinstance(v, int) and not isinstance(v, bool), _int_from_json,
            recognizes=_is(int), parse=int),
    _json_row(TypeKind.FLOAT, recognizes=_is(float), parse=float, matches=lambda v, t: _is_number(v),
              to_jsonable=lambda v, t: float(v), from_jsonable=lambda v, t: float(v)),
    _scalar(TypeKind.STR, lambda v: isinstance(v, str), recognizes=_is(str), parse=str),
    _scalar(TypeKind.BOOL, lambda v: isinstance(v, bool), recognizes=_is(bool), parse=_parse_bool),
    _json_row(TypeKind.NONE, describe=_name("None"), recognizes=lambda a: a is None or a is type(None),
              matches=lambda v, t: False),  # None itself is handled by the dispatchers
    _json_row(TypeKind.LIST, describe=_describe_list, matches=_list_matches, to_jsonable=_list_to_json,
              from_jsonable=_list_from_json, json_problem=_list_problem),
    _json_row(TypeKind.DICT, describe=_describe_dict, matches=_dict_matches, to_jsonable=_dict_to_json,
              from_jsonable=_dict_from_json, json_problem=_dict_problem),
    Codec(TypeKind.DATACLASS, describe=_describe_dataclass, matches=_dataclass_matches,
          to_jsonable=_dataclass_to_json, from_jsonable=_dataclass_from_json, revive=_dataclass_revive,
          json_problem=_dataclass_problem, write=_dataclass_write, read=_dataclass_read, hash=_dataclass_hash),
    Codec(TypeKind.DATAFRAME, describe=_name("pandas.DataFrame"), recognizes=is_dataframe_type,
          matches=lambda v, t: is_dataframe_type(type(v)), write=_frame_write, read=_frame_read,
          hash=lambda v, t: dataframe_hash(v), artifact=True),
    # Model before Dataset: the order type_of tries annotations in.
    _directory_row(TypeKind.MODEL, Model, "il.Model"),
    _directory_row(TypeKind.DATASET, Dataset, "il.Dataset"),
    Codec(TypeKind.METRICS, describe=_name("il.Metrics"), recognizes=_subclass_of(Metrics),
          matches=_metrics_matches, write=_metrics_write, read=_metrics_read, hash=_hash_json, artifact=True,
          to_jsonable=lambda v, t: dict(v), from_jsonable=lambda v, t: Metrics(v)),
    Codec(TypeKind.ARTIFACTS, describe=_describe_list, matches=_artifacts_matches, write=_artifacts_write,
          read=_artifacts_read, hash=_artifacts_hash, artifact=True),
)

CODECS: dict[TypeKind, Codec] = {row.kind: row for row in _ROWS}
