"""What a run decided and returned, as the receipt keeps it: the pipeline's outputs and each
``il.when`` gate's decision.

The receipt is the record a regulated team keeps, so a champion gate's ``promote`` and its
reason belong there, not only in the terminal and MLflow. Values are kept as JSON: scalars,
lists and mappings as they are (long lists clipped), non-finite floats as the strings JSON
lacks, a DataFrame as its shape and columns, an artifact as its path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from interlock.core.model.conditions import gate_label
from interlock.core.model.pipeline_spec import PipelineSpec

MAX_ITEMS = 100  # list items kept per list; the rest is counted


def summarize(value: Any) -> Any:
    """``value`` as JSON the receipt can hold (see the module doc)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple: several outputs
        return {k: summarize(v) for k, v in value._asdict().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: summarize(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): summarize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        kept = [summarize(v) for v in value[:MAX_ITEMS]]
        return kept if len(value) <= MAX_ITEMS else {"items": kept, "more": len(value) - MAX_ITEMS}
    shape, columns = getattr(value, "shape", None), getattr(value, "columns", None)
    if shape is not None and columns is not None:  # a DataFrame: never its rows
        return {"type": type(value).__name__, "rows": int(shape[0]), "columns": [str(c) for c in list(columns)[:MAX_ITEMS]]}
    path = getattr(value, "path", None)
    if path is not None:  # il.Model, il.Dataset: where it is, not what is in it
        return {"type": type(value).__name__, "path": str(path)}
    return {"type": type(value).__name__}


def gate_records(spec: PipelineSpec, decided: Mapping[str, bool]) -> list[dict[str, Any]]:
    """Each gate that was decided: its id, its condition as written, whether it held."""
    return [{"id": g.id, "condition": gate_label(g), "held": bool(decided[g.id])} for g in spec.gates if g.id in decided]
