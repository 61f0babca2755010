"""Names that become identifiers on every backend: steps, nodes, pipeline parameters.

A step or node name becomes a KFP task and component name (sanitized to a Kubernetes name:
lowercase, ``_`` -> ``-``, and a pod label value of at most 63 characters), a Flyte task
name segment (``<pipeline>.<node>``) and node id, a directory under the run state and part
of a checkpoint key. One rule fits them all, checked when the step is declared or the
pipeline is built, never at run time:

    a letter, then letters, digits, '_' or '-'; at most 63 characters.

So ``b/train`` (nests paths, aliases checkpoint keys), ``a.b`` (a Flyte name separator) and
a 300-character name are refused with the rule in the message.

Pipeline names follow the same rule, so an Airflow DAG id or a Flyte workflow name
(``example_branch_operator``) names a pipeline as it is. A backend whose names are DNS-1123
labels (a KFP pipeline, a Kubernetes object) renders it with ``dns_name`` and says so.
"""

from __future__ import annotations

import re

from interlock.core.base.errors import PipelineDefinitionError

MAX_NAME = 63  # a Kubernetes label value / DNS-1123 label
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
RULE = f"a letter, then letters, digits, '_' or '-', at most {MAX_NAME} characters"


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a step or a node; None when it can."""
    if not isinstance(name, str) or not name:
        return f"a name must be a non-empty string, got {name!r}"
    if len(name) > MAX_NAME:
        return f"{len(name)} characters (at most {MAX_NAME}: KFP task names become Kubernetes label values)"
    if not _NAME.fullmatch(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_-"))})
        if bad:
            return f"it contains {''.join(bad)!r}"
        return "it must start with a letter"
    return None


def dns_name(name: str) -> str:
    """``name`` as a DNS-1123 label (lowercase letters, digits, '-'): ``Fraud_Retrain`` ->
    ``fraud-retrain``. A name that is one already comes back unchanged."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")[:MAX_NAME] or "x"


def check_step_name(name: object, *, what: str = "step", pipeline: str | None = None) -> str:
    """``name`` if it can name a step or a node on every backend, else a PipelineDefinitionError."""
    problem = name_problem(name)
    if problem is not None:
        if what == "pipeline":
            raise PipelineDefinitionError(
                f"invalid pipeline name {name!r}: {problem}",
                hint=f"pipeline names are {RULE} (backends whose names are DNS labels, such as KFP, "
                "get it lowercased with '-' for '_')",
            )
        raise PipelineDefinitionError(
            f"invalid {what} name {name!r}: {problem}",
            pipeline=pipeline, step=name if isinstance(name, str) else None,
            hint=f"{what} names are {RULE} (they become KFP task and Flyte node names)",
        )
    return name  # type: ignore[return-value]
