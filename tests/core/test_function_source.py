"""core/source.function_source gives exactly inspect.getsource's text (the step fingerprint
hashes it, so a changed byte would change every cache key and compiled fingerprint), and
takes its fast path, without the tokenizer, for an ordinary module-level step."""

from __future__ import annotations

import importlib.util
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

from interlock.core.dsl import source
from interlock.core.dsl.source import function_source

EDGE_CASES = '''\
import functools


def plain(a: int, b: int) -> int:
    return a + b + 1


def trailing_comments(a):
    x = a
    # as deep as the body: kept
        # deeper: kept
  # shallower, between two kept ones: inside the slice anyway
    # kept again

# column 0: not part of the function
def after_comment():
    pass
  # indented less than the body: dropped


def header_comment():
    # before the first statement
    return 1



def blank_lines_inside(a):

    b = a

    return b


@functools.lru_cache(
    maxsize=None,
)
def decorated_multiline(a: int) -> int:
    return a


def black_signature(
    a: int,
    b: int,
) -> int:
    return a + b


def docstring_at_column_0():
    """A docstring whose text
starts at column 0
and ends here."""
    return 1


def brackets_at_column_0():
    return [
1, 2]


def one_liner(): return 1


async def coroutine(a):
    return a


def wrapper_target(a):
    return a


@functools.wraps(wrapper_target)
def wrapping(*args, **kwargs):
    return wrapper_target(*args, **kwargs)


def tabs(a):
\tb = a
\treturn b


def semicolons(a):
    b = a; c = b;
    return c


def nested_first():
    @functools.lru_cache
    def inner():
        return 1
    return inner


def continuation(a):
    return a + \\
        1


def outer():
    def nested(a):
        return a
    return nested


if True:
    def indented(a):
        return a

lambda_ = lambda a: a  # noqa: E731


class Holder:
    def method(self):
        return 1


def last_in_file(a):
    return a
    # trailing, no newline at the end'''


def _module(tmp_path: Path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _functions(mod):
    for value in list(vars(mod).values()):
        if inspect.isfunction(value):
            yield value
        if inspect.isclass(value):
            yield from (v for v in vars(value).values() if inspect.isfunction(v))
    for fn in (getattr(mod, "outer", None), getattr(mod, "nested_first", None)):
        if fn is not None:
            yield fn()


def test_edge_cases_match_inspect(tmp_path: Path) -> None:
    mod = _module(tmp_path, "fs_edge_cases", EDGE_CASES)
    checked = 0
    for fn in _functions(mod):
        assert function_source(fn) == inspect.getsource(fn), fn.__qualname__
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("name", [
    "argparse", "ast", "collections", "dataclasses", "email.utils", "enum", "functools", "inspect",
    "json.decoder", "logging", "pathlib", "shutil", "subprocess", "tarfile", "textwrap", "typing", "zipfile",
    "interlock.core.dsl.step", "interlock.core.model.spec", "interlock.core.dsl.build", "interlock.core.run.state",
])
def test_real_modules_match_inspect(name: str) -> None:
    mod = importlib.import_module(name)
    fns = [f for f in vars(mod).values() if inspect.isfunction(f) and f.__module__ == mod.__name__]
    assert fns
    for fn in fns:
        assert function_source(fn) == inspect.getsource(fn), f"{name}.{fn.__qualname__}"


def test_a_plain_step_takes_the_fast_path(tmp_path: Path) -> None:
    # The speed this module exists for: no tokenizer pass for an ordinary decorated step.
    mod = _module(tmp_path, "fs_plain", textwrap.dedent('''\
        import functools

        @functools.lru_cache
        def s000(a: int, b: int) -> int:
            """Adds."""
            return a + b + 0
        # trailing comment at column 0
    '''))
    fn = mod.s000.__wrapped__
    assert source._fast_source(fn) == inspect.getsource(fn)
    assert source._fast_source(mod.s000) is not None


def test_no_source_raises_as_inspect_does() -> None:
    namespace: dict[str, object] = {}
    exec("def made():\n    return 1\n", namespace)  # noqa: S102
    with pytest.raises(OSError):
        inspect.getsource(namespace["made"])
    with pytest.raises(OSError):
        function_source(namespace["made"])  # type: ignore[arg-type]
