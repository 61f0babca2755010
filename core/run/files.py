"""Writing run-state files so that a reader never sees half of one.

Atomic replacement (``write_json_atomic``, ``write_text_atomic``), exclusive creation
(``create_text``) and append-only records (``append_record``, read back by
``last_object``: the last whole line that parses, so a record cut short by a kill hides
neither its neighbours).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    write_text_atomic(path, json.dumps(data, sort_keys=True, indent=indent, default=str))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a temporary file next to ``path``, then rename it over ``path``: a reader, or a
    process killed at any point, sees the old file or the new one, never half of one. No
    fsync: the state must survive the process (a kill, an eviction), not the machine."""
    where = os.fspath(path)
    head, name = os.path.split(where)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    data = text.encode()
    try:  # the folder exists but for a file's first write: make it only then
        _write_bytes(tmp, data, os.O_TRUNC)
    except FileNotFoundError:
        os.makedirs(head or ".", exist_ok=True)
        _write_bytes(tmp, data, os.O_TRUNC)
    os.replace(tmp, where)


def create_text(path: str | Path, text: str) -> bool:
    """Write ``path`` only if no file is there (O_EXCL); False if one is. For a file's first
    write: a rename has nothing to replace, so it buys nothing. A reader, or a process killed
    mid-write, may see the file empty or cut short: readers take an unreadable file for an
    absent one (``RunState._read``), which is what it was a moment before, and the next write
    (``append_record``) starts a line of its own after it. Half a file is never taken for a record."""
    where = os.fspath(path)
    data = text.encode()
    try:
        _write_bytes(where, data, os.O_EXCL)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
        try:
            _write_bytes(where, data, os.O_EXCL)
        except FileExistsError:
            return False
    return True


def append_record(path: str | Path, text: str) -> None:
    """Append ``text`` (one line of JSON) to the record file at ``path``, creating it if needed.

    Appended, not swapped in: a step writes its fragment twice (before the call: what a
    killed attempt leaves; after: how it ended), and a new file for the second write, then
    a rename, cost more than the step's shim on some file systems (an inode made and freed
    per step). Atomic for readers all the same: ``last_object`` takes the last line that
    ends in a newline, so a record still being written, or cut short by a kill, is not read
    and the one before it still is. The record starts with a newline of its own, so one cut
    short before it can never run into it."""
    where = os.fspath(path)
    data = f"\n{text}\n".encode()
    try:
        _write_bytes(where, data, os.O_APPEND)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
        _write_bytes(where, data, os.O_APPEND)


def last_object(data: bytes) -> dict[str, Any] | None:
    """The last whole record of a record file (``append_record``): its last line that ends
    in a newline and holds a JSON object. A line that does not parse is passed over for the
    one before it: a record torn where a file system wrote its end before a page ahead of it
    (a network volume, a node lost mid-write) counts as not written, as a record cut short
    does. A file without any newline is one record, as written before records were appended
    (or a first record cut short, which does not parse: None)."""
    end = data.rfind(b"\n")
    lines = [data] if end < 0 else data[:end].split(b"\n")
    for line in reversed(lines):
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _write_bytes(path: str, data: bytes, mode: int) -> None:
    # os.open: the mode flags (O_EXCL, O_APPEND, O_TRUNC) say create, append or replace.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def json_by_lines(data: Mapping[str, Any]) -> str:
    """A JSON object with one key per line and one item of a list per line: readable, and
    written by json's C encoder (``indent`` makes json use its pure-Python one, about a
    tenth of a millisecond per step of a receipt)."""
    def enc(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    def member(value: Any) -> str:
        if isinstance(value, list) and value:
            return "[\n" + ",\n".join(f"  {enc(v)}" for v in value) + "\n ]"
        return enc(value)

    return "{\n" + ",\n".join(f" {enc(str(k))}: {member(data[k])}" for k in sorted(data)) + "\n}\n"
