"""A file inside a pydantic model and inside a dataclass (issue 31 item 9, as a Flyte 2 model
carries a flyte.io.File): a field of a file kind (il.Dataset here) moves as a folder beside the
model's JSON, read back as that kind on the next step (tests/conformance/test_model_files.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pydantic

import interlock as il


class Shard(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)

    name: str
    rows: int
    data: il.Dataset
    extra: il.Dataset | None = None


@dataclass
class Bundle:
    label: str
    data: il.Dataset


@il.step
def write_shard(name: str, rows: int) -> Shard:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=f"{name}-"))  # the step's own files; interlock copies them on
    (folder / "rows.json").write_text(json.dumps(list(range(rows))))
    return Shard(name=name, rows=rows, data=il.Dataset(folder, {"rows": rows}))


@il.step
def bundle(shard: Shard) -> Bundle:
    rows = json.loads((Path(shard.data.path) / "rows.json").read_text())
    assert shard.extra is None and shard.data.metadata == {"rows": shard.rows}
    return Bundle(label=f"{shard.name}:{sum(rows)}", data=shard.data)


@il.step
def summary(b: Bundle) -> str:
    rows = json.loads((Path(b.data.path) / "rows.json").read_text())
    return f"{b.label} ({len(rows)} rows)"


@il.pipeline(name="conf-model-files")
def model_files(name: str = "s1", rows: int = 4):
    return summary(b=bundle(shard=write_shard(name=name, rows=rows)))
