"""Names on the KFP side: component functions per node, and port names in signatures.

A single JSON output is returned as KFP's ``Output``; several come back as a NamedTuple
named by port. Inputs and artifact outputs are both parameters of the generated function, so an output
that shares an input's name is renamed ``<name>_out``. KFP derives component and task
names from the function name (``_`` -> ``-``), so a node's function name is its name made
a Python identifier, unique within the pipeline.
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache

from interlock.core.spec import PipelineSpec, StepSpec

SINGLE = "Output"  # kfp's name for a component's one returned value


def single_return(step: StepSpec) -> bool:
    """One JSON output and no NamedTuple: the component returns it plainly, as KFP's "Output"
    (the name kfp.local can resolve in a ``dsl.If`` condition)."""
    return len(step.outputs) == 1 and not step.output_tuple and not step.outputs[0].type.is_artifact


@lru_cache(maxsize=4096)
def _io_names(inputs: tuple[str, ...], outputs: tuple[tuple[str, bool], ...], output_tuple: str | None,
              ) -> tuple[dict[str, str], dict[str, str]]:
    names_in = {p: p for p in inputs}
    if len(outputs) == 1 and not output_tuple and not outputs[0][1]:  # single_return
        return names_in, {outputs[0][0]: SINGLE}
    taken = set(names_in.values())
    names_out: dict[str, str] = {}
    for port, _ in outputs:
        name = port
        while name in taken:
            name = f"{name}_out"
        taken.add(name)
        names_out[port] = name
    return names_in, names_out


def io_names(step: StepSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(input port -> KFP name, output port -> KFP name)."""
    # Keyed on the ports' names only: hashing a whole StepSpec (its policies) per call cost
    # more than the names.
    return _io_names(tuple(p.name for p in step.inputs), tuple((p.name, p.type.is_artifact) for p in step.outputs),
                     step.output_tuple)


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
