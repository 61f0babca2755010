"""The fenced Python blocks of the docs and the README, for the tests that run them.

A block's info string says what it is (tests/test_docs.py): ```python (run as written),
```python tested-in=tests/PATH.py (run by that test) or ```python fragment (not run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    info: str  # what follows ```python: "", "fragment" or "tested-in=..."
    code: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text()
    return [Block(doc, text[: m.start()].count("\n") + 1, m.group(1).strip(), m.group(2)) for m in _FENCE.finditer(text)]


def every_block() -> list[Block]:
    return [b for doc in sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"]) for b in blocks(doc)]


def first_block_after(doc: str, heading: str) -> str:
    """The code of the first Python block after ``heading`` in ``doc`` ("docs/control-flow.md")."""
    path = ROOT / doc
    at = path.read_text().index(heading)
    line = path.read_text()[:at].count("\n") + 1
    return next(b.code for b in blocks(path) if b.line > line)
