"""The few SVG and HTML helpers the pictures share: escaping, text width, one element.

Pictures are written as text, with no drawing library: a page must open offline, anywhere.
"""

from __future__ import annotations

from html import escape

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"
CHAR_W = 7.0  # average advance of a 12px sans-serif character (DejaVu's is wide): boxes are sized from it


def esc(value: object) -> str:
    """Text for an element or an attribute (quotes included)."""
    return escape(str(value), quote=True)


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
    for key, value in attrs.items():
        if value is not None:
            parts.append(f'{key.rstrip("_").replace("_", "-")}="{esc(value)}"')
    head = " ".join(parts)
    return f"<{head}>{body}</{tag}>" if body else f"<{head}/>"


def num(value: float) -> str:
    """A coordinate, short: SVG files stay small and diff-able."""
    return f"{value:.1f}".removesuffix(".0")  # one decimal always: "12.0" -> "12"
