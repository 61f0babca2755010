"""Names on the KFP side: component functions per node, and port names in signatures.

These are the names KFP users see: in the UI, in ``task.outputs[...]`` and in ML Metadata.

- A single JSON output is returned as KFP's ``Output`` (``task.output``), as a component
  written ``-> int`` would.
- A single artifact output (``-> il.Model``) is an ``Output[Model]`` parameter named by its
  artifact class, snake-cased, as KFP's own examples name them: ``model``, ``dataset``,
  ``metrics``. (It cannot be ``Output``: kfp refuses a parameter of that name, and a
  returned artifact (``-> Model``) needs ``dsl.get_uri()``, which the KFP backend does not
  support.)
- NamedTuple outputs keep their field names.

Inputs and artifact outputs are both parameters of the generated function, so an output
that shares an input's name is renamed ``<name>_out`` (``def tune(model: il.Model) ->
il.Model`` outputs ``model_out``). KFP derives component and task names from the function
name (``_`` -> ``-``), so a node's function name is its name made a Python identifier,
unique within the pipeline.
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from interlock.core.model.names import dns_name

if TYPE_CHECKING:
    from interlock.core.model.pipeline_spec import PipelineSpec
    from interlock.core.model.spec import StepSpec
    from interlock.core.model.types import TypeSpec

SINGLE = "Output"  # kfp's name for a component's one returned value

# The run id on a cluster, stable across KFP's retries of a task: the pod's `pipeline/runid`
# label, handed to the task by the downward API as RUN_ID_ENV (the backends' run_id_env).
RUN_ID_LABEL = "metadata.labels['pipeline/runid']"
RUN_ID_ENV = "KFP_RUN_ID"


def kfp_pipeline_name(name: str) -> str:
    """The pipeline's name in the IR: KFP's rule is ``^[a-z0-9][a-z0-9-]{0,127}$``
    (``example_branch_operator`` -> ``example-branch-operator``)."""
    return dns_name(name)


def single_return(step: StepSpec) -> bool:
    """One JSON output and no NamedTuple: the component returns it plainly, as KFP's "Output"
    (the name kfp.local can resolve in a ``dsl.If`` condition)."""
    return len(step.outputs) == 1 and not step.output_tuple and not step.outputs[0].type.is_artifact


def single_artifact(step: StepSpec) -> bool:
    """One artifact output and no NamedTuple: its port has no name of its own (``o0``)."""
    return len(step.outputs) == 1 and not step.output_tuple and step.outputs[0].type.is_artifact


def artifact_name(t: TypeSpec) -> str:
    """The name KFP users give an output of this artifact type: its class, snake-cased
    (``Model`` -> ``model``, ``ClassificationMetrics`` -> ``classification_metrics``)."""
    from .types import kfp_codec

    form = kfp_codec(t).form
    cls = form.artifact if form is not None and form.artifact and form.artifact.isidentifier() else "Artifact"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls).lower()


@lru_cache(maxsize=4096)
def _io_names(inputs: tuple[str, ...], outputs: tuple[tuple[str, str | None], ...], output_tuple: str | None,
              ) -> tuple[dict[str, str], dict[str, str]]:
    # outputs: (port, None for a JSON value, else the name an artifact gets when it is the only output)
    names_in = {p: p for p in inputs}
    single = len(outputs) == 1 and not output_tuple
    if single and outputs[0][1] is None:  # single_return
        return names_in, {outputs[0][0]: SINGLE}
    taken = set(names_in.values())
    names_out: dict[str, str] = {}
    for port, by_type in outputs:
        name = by_type if single and by_type else port
        while name in taken:
            name = f"{name}_out"
        taken.add(name)
        names_out[port] = name
    return names_in, names_out


def io_names(step: StepSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(input port -> KFP name, output port -> KFP name)."""
    # From the ports' names only: a step's policies play no part in them.
    single = single_artifact(step)
    outs = tuple((p.name, (artifact_name(p.type) if single else "") if p.type.is_artifact else None)
                 for p in step.outputs)
    return _io_names(tuple(p.name for p in step.inputs), outs, step.output_tuple)


def identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text).strip("_").lower() or "step"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"s_{name}"
    return name


def function_names(spec: PipelineSpec) -> dict[str, str]:
    """node name -> the generated component function's name (unique, stable)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for node in spec.nodes:
        base = identifier(node.name)
        name, i = base, 2
        # KFP lowercases and maps '_' to '-': compare in that form to avoid clashes there too.
        while name.replace("_", "-") in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name.replace("_", "-"))
        out[node.name] = name
    return out
