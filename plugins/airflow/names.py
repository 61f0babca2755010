"""Deterministic Flyte execution names and Kubernetes-valid labels and annotations.

Stdlib only, so it can be tested (and reasoned about) without Airflow or flytekit.

Flyte execution names must be lowercase, start with a letter and have at most 20
characters. Labels end up on Kubernetes pods, so keys and values must follow the
Kubernetes syntax; a value that had to be changed gets a short hash of the original
so that two different run ids never collapse into the same label value.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

MAX_EXECUTION_NAME = 20
MAX_GENERATIONS = 999  # three digits keep the name within 20 characters
_NAME_PREFIX = "af"  # "airflow": tells an operator on the Flyte side who launched it
_HASH_CHARS = MAX_EXECUTION_NAME - len(_NAME_PREFIX) - 4  # room for "-" and 3 digits

EXECUTION_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_LABEL = 63
_MAX_PREFIX = 253


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def launch_plan_name(pipeline_or_name: Any) -> str:
    """A launch plan name from a string or an interlock pipeline (anything with ``.name``).

    An interlock pipeline named ``fraud-retrain`` is registered on Flyte as a workflow and
    a default launch plan with that same name.
    """
    name: Any
    if isinstance(pipeline_or_name, str):
        name = pipeline_or_name
    else:
        name = getattr(pipeline_or_name, "name", None)
        if not isinstance(name, str):
            raise TypeError(
                f"expected a launch plan name or a pipeline with a .name, got {pipeline_or_name!r}"
            )
    if not name:
        raise ValueError("the launch plan name is empty")
    return name


def logical_run_key(
    *,
    dag_id: str,
    task_id: str,
    run_id: str,
    map_index: int,
    project: str,
    domain: str,
    launch_plan: str,
    namespace: str = "",
) -> str:
    """The identity of one logical Airflow run of one launch plan; Airflow's try number is not part of it.

    Retries of the same task instance share the key, so they find the same executions.
    ``namespace`` tells apart deployments (staging, prod) that run the same DAG and task
    ids against the same Flyte project and domain. ``launch_key`` completes the key with
    what is launched (version, inputs) once the launch plan is resolved.
    """
    return "\x1f".join(
        [dag_id, task_id, run_id, str(map_index), project, domain, launch_plan, f"ns={namespace}"]
    )


def inputs_digest(serialized: bytes) -> str:
    """The sha256 of a launch's inputs (the deterministic bytes of their literal map)."""
    return hashlib.sha256(serialized).hexdigest()


def launch_key(run_key: str, *, version: str, inputs_sha256: str) -> str:
    """What an execution name hashes: the logical run, the launch plan version and the inputs.

    A retry with the same inputs and version finds the execution an earlier try started;
    a clear after the upstream data (hence the inputs) changed, or after a new launch plan
    version was registered, gets a name of its own and launches.
    """
    if not version:
        raise ValueError("launch_key needs the resolved launch plan version")
    return "\x1f".join([run_key, f"v={version}", f"in={inputs_sha256}"])


def execution_name(key: str, generation: int) -> str:
    """The Flyte execution name for ``generation`` (0, 1, ...) of a launch key.

    A new generation is used only after the previous one ended in a terminal failure.
    The name is ``af`` + 14 hex digits of the key's sha256 + ``-<generation>``: at most 20
    characters, lowercase, starting with a letter, as Flyte requires.
    """
    if not 0 <= generation <= MAX_GENERATIONS:
        raise ValueError(f"generation must be within 0..{MAX_GENERATIONS}, got {generation}")
    return f"{_NAME_PREFIX}{_digest(key)[:_HASH_CHARS]}-{generation}"


def is_valid_execution_name(name: str) -> bool:
    return bool(EXECUTION_NAME_RE.fullmatch(name)) and not name.endswith("-")


def is_valid_label_value(value: str) -> bool:
    return len(value) <= _MAX_LABEL and bool(_LABEL_VALUE_RE.fullmatch(value))


def is_valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > _MAX_PREFIX or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return bool(name) and is_valid_label_value(name)


def _squash(text: str, limit: int, *, lowercase: bool = False) -> str:
    """Replace characters Kubernetes rejects, trim to ``limit``; suffix a hash when anything changed."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text.lower() if lowercase else text)
    cleaned = cleaned.strip("-_.")
    if cleaned == text and len(cleaned) <= limit:
        return cleaned
    suffix = _digest(text)[:8]
    head = cleaned[: limit - len(suffix) - 1].rstrip("-_.")
    return f"{head}-{suffix}" if head else f"h{suffix}"


def label_value(value: object) -> str:
    """A Kubernetes-valid label value for any value (an empty value stays empty)."""
    text = str(value)
    if text == "" or is_valid_label_value(text):
        return text
    return _squash(text, _MAX_LABEL)


def label_key(key: str) -> str:
    """A Kubernetes-valid label or annotation key: ``[dns-prefix/]name``."""
    if is_valid_label_key(key):
        return key
    prefix, _, name = key.rpartition("/")
    name = _squash(name, _MAX_LABEL) if name else "key"
    if prefix:
        prefix = re.sub(r"[^a-z0-9.-]+", "-", prefix.lower()).strip("-.")
        prefix = re.sub(r"\.+", ".", prefix)
        prefix = ".".join(part.strip("-") for part in prefix.split(".") if part.strip("-"))
        prefix = prefix[:_MAX_PREFIX].strip("-.")
    return f"{prefix}/{name}" if prefix else name


def sanitize_labels(labels: Mapping[str, object]) -> dict[str, str]:
    """Kubernetes-valid labels; raises if two keys collapse into one."""
    out: dict[str, str] = {}
    for key, value in labels.items():
        k = label_key(str(key))
        if k in out:
            raise ValueError(f"labels {key!r} and another key both map to {k!r}; rename one")
        out[k] = label_value(value)
    return out


def sanitize_annotations(annotations: Mapping[str, object]) -> dict[str, str]:
    """Annotation keys follow the label-key syntax; values are free text (kept whole)."""
    out: dict[str, str] = {}
    for key, value in annotations.items():
        k = label_key(str(key))
        if k in out:
            raise ValueError(f"annotations {key!r} and another key both map to {k!r}; rename one")
        out[k] = str(value)
    return out
