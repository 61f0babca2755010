"""The few SVG and HTML helpers the pictures share: escaping, text width, one element.

Pictures are written as text, with no drawing library: a page must open offline, anywhere,
and core stays light (no imports beyond the standard library).
"""

from __future__ import annotations

from html import escape

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"
CHAR_W = 7.0  # average advance of a 12px sans-serif character (DejaVu's is wide): boxes are sized from it


def esc(value: object) -> str:
    """Text for an element or an attribute (quotes included)."""
    text = value if type(value) is str else str(value)
    # Most of a page's text (coordinates, names, colours) has nothing to escape: a report
    # escapes tens of thousands of values, and html.escape makes five passes over each.
    if "&" in text or "<" in text or ">" in text or '"' in text or "'" in text:
        return escape(text, quote=True)
    return text


_ATTR_NAMES: dict[str, str] = {}  # keyword -> attribute name (`stroke_width` -> `stroke-width`)


def _attr_name(key: str) -> str:
    name = _ATTR_NAMES.get(key)
    if name is None:
        name = _ATTR_NAMES[key] = key.rstrip("_").replace("_", "-")
    return name


def text_width(text: str, size: float = 12.0) -> float:
    return len(text) * CHAR_W * size / 12.0


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"


def fit(text: str, size: float, room: float) -> str:
    """``text``, cut with an ellipsis where its estimated width passes ``room`` pixels."""
    width = text_width(text, size)
    return text if width <= room else clip(text, int(len(text) * room / max(width, 1.0)))


def el(tag: str, body: str = "", **attrs: object) -> str:
    """``<tag a="b">body</tag>``; attribute names use ``_`` for ``-`` (``stroke_width``),
    a trailing ``_`` is dropped (``class_``), and None values are left out."""
    parts = [tag]
    names = _ATTR_NAMES
    for key, value in attrs.items():
        if value is None:
            continue
        parts.append(f'{names.get(key) or _attr_name(key)}="{esc(value)}"')
    head = " ".join(parts)
    return f"<{head}>{body}</{tag}>" if body else f"<{head}/>"


def num(value: float) -> str:
    """A coordinate, short: SVG files stay small and diff-able."""
    return f"{value:.1f}".removesuffix(".0")  # one decimal always: "12.0" -> "12"


def wrap(head: str, body: str) -> str:
    """``<head>body</tag>``, or ``<head/>`` without a body, as ``el`` writes it; ``head`` is
    the tag and its attributes, already written (the pictures' hot paths spell them out:
    ``el``'s keyword handling was most of a report's drawing, 18 calls a node)."""
    if not body:
        return f"<{head}/>"
    return f"<{head}>{body}</{head.partition(' ')[0]}>"
