"""A module-level function's source text, as ``inspect.getsource`` gives it, without tokenizing.

``inspect.getsource`` finds where a function ends by running Python's pure-Python tokenizer
over it (``inspect.getblock``): about 55 us for a three-line step, most of what decorating a
step costs, paid once per step in every process that imports a pipeline (and so inside every
compile). Here the end comes from the C parser instead: the lines from the function's first
decorator up to the next statement at column 0 are parsed with ``ast``; when they parse as
exactly that one function, the block ends at its last statement, extended over the comment
lines after it that are indented at least as much as its body (what ``getblock`` keeps).
Anything else (a method or nested function, a lambda, a one-line ``def``, a backslash
continuation, a form feed, text that does not parse) goes to ``inspect.getsource``, so the
answer is always the same text; tests/core/test_function_source.py checks that against
``inspect.getsource`` over the functions of many modules.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

_WS = " \t\f"


def function_source(fn: Callable[..., Any]) -> str:
    """``inspect.getsource(fn)``, for a module-level ``def``, without its tokenizer pass.

    Raises what ``inspect.getsource`` raises (OSError, TypeError) when there is no source.
    """
    fast = _fast_source(fn)
    return fast if fast is not None else inspect.getsource(fn)


def _fast_source(fn: Callable[..., Any]) -> str | None:
    fn = inspect.unwrap(fn)  # as getsource does: a functools.wraps wrapper shows what it wraps
    code = getattr(fn, "__code__", None)
    if code is None or not inspect.isfunction(fn) or code.co_name == "<lambda>":
        return None
    lines, lnum = inspect.findsource(fn)  # what getsource starts from (raises as it does)
    if lnum != code.co_firstlineno - 1 or lnum >= len(lines) or lines[lnum][:1] in ("", *_WS, "\n", "\r"):
        return None  # not a column-0 def/decorator line: leave it to inspect
    cut = _block_cut(lines, lnum)
    if cut is None:
        return None
    region = lines[lnum:cut]
    text = "".join(region)
    if "\f" in text or any(line.rstrip("\r\n").endswith("\\") for line in region):
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    node = tree.body[0]
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    if node.name != code.co_name or first != 1 or node.end_lineno is None:
        return None
    body0 = node.body[0]
    start = body0.decorator_list[0].lineno if isinstance(body0, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
        and body0.decorator_list else body0.lineno
    body_col0 = body0.col_offset  # UTF-8 bytes; the same as characters when only whitespace precedes
    if region[start - 1][:body_col0].strip(_WS):
        return None  # a one-line def: no INDENT token, so getblock ends it differently
    last = node.end_lineno
    for row in range(node.end_lineno + 1, len(region) + 1):
        line = region[row - 1]
        stripped = line.lstrip(_WS)
        if stripped.startswith("#") and len(line) - len(stripped) >= body_col0:
            last = row  # getblock keeps a trailing comment indented as deep as the body
    return "".join(region[:last])


def _block_cut(lines: list[str], lnum: int) -> int | None:
    """Index of the first line after the function that starts a statement at column 0."""
    i, n = lnum, len(lines)
    while i < n and not lines[i].startswith(("def ", "async def ")):
        i += 1  # the decorators (and their argument lines) up to this function's `def`
    i += 1
    while i < n:
        line = lines[i]
        first = line[:1]
        if first and first not in _WS and first not in "\r\n#)]}":
            return i
        i += 1
    return n

