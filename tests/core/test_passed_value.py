"""passed_value: il.map's per-item value hand-over gives what the file round trip gives."""

import dataclasses
import math
from pathlib import Path

import pytest

from interlock.core.base.errors import SerializationError
from interlock.core.model.types import type_of
from interlock.core.model.values import passed_value, read_value, write_value


@dataclasses.dataclass
class Point:
    x: int
    label: str
    tags: list[str]


CASES = [
    (int, 3), (float, 2.5), (float, math.inf), (str, "héllo"), (bool, True),
    (list[int], [1, 2, 3]), (dict[str, float], {"b": 1.0, "a": 2.0}), (list[Point], [Point(1, "a", ["t"])]),
    (Point, Point(2, "b", [])), (int | None, None),
]


@pytest.mark.parametrize(("annotation", "value"), CASES, ids=[repr(v) for _, v in CASES])
def test_passed_value_is_the_file_round_trip(tmp_path: Path, annotation: object, value: object) -> None:
    t = type_of(annotation)
    write_value(value, t, tmp_path / "file")
    through_files = read_value(t, tmp_path / "file")
    in_memory = passed_value(value, t, tmp_path / "mem")
    assert in_memory == through_files
    assert type(in_memory) is type(through_files)
    assert not (tmp_path / "mem").exists()  # a JSON kind writes no folder


def test_a_value_that_is_not_json_is_refused_as_the_file_write_refuses_it(tmp_path: Path) -> None:
    t = type_of(dict[str, int])
    with pytest.raises(SerializationError, match="not JSON-able"):
        passed_value({"a": object()}, t, tmp_path / "mem")
