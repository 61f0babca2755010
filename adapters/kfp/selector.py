"""Plain KFP components that turn a gate's condition into a single bool ``Output``.

KFP conditions compare a whole task output, so ``il.when(report.approved)`` on a dataclass
output needs the field picked first (everywhere). kfp.local can only resolve a condition on
an output named ``Output``, so under kfp-local a NamedTuple field (``decision.promote``)
goes through ``as_bool`` too. Module-level and self-contained: kfp's getsource ships them
as they are, and they need nothing from interlock in the container.
"""

from kfp import dsl


@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def select_bool(value: dict, path: list) -> bool:
    for key in path:
        value = value[key]
    return bool(value)


@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def select_bool_text(value: str, path: list) -> bool:
    """The same, for a dataclass that travels as JSON text (it holds a dict or an Optional)."""
    import json

    picked = json.loads(value)
    for key in path:
        picked = picked[key]
    return bool(picked)


@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def as_bool(value: bool) -> bool:
    return bool(value)


# kfp-local only: the same pass-through for the values a condition compares (n > 5, s == "a").
@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def as_int(value: int) -> int:
    return value


@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def as_float(value: float) -> float:
    return value


@dsl.component(base_image="python:3.11-slim", install_kfp_package=False)
def as_str(value: str) -> str:
    return value
