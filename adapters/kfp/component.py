"""One KFP lightweight component per pipeline node, generated as source text.

kfp ships a component by reading its function with ``inspect.getsource``: closures,
module-level helpers and imports never reach the container. So each node gets a small
function whose typed signature is the node's ports (KFP checks wiring with it) and whose
body only imports interlock and calls the shim with the node's identity::

    def train(features: Input[Dataset], params: dict, model: Output[Model]) -> ...:
        from interlock.adapters.kfp.entry import run_node
        return run_node('team.pipelines:fraud', 'train', '<fingerprint>', {...})

The source is compiled under a synthetic file name registered in ``linecache``, which is
where ``inspect.getsource`` looks. The fingerprint literal sits in the component's command,
so KFP's cache key (local and cluster) changes when the step's code changes.
"""

from __future__ import annotations

import dataclasses
import linecache
from dataclasses import dataclass
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import TypeKind
from interlock.core.model.graph import binding_type
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.spec import BindingKind, StepSpec
from interlock.core.model.types import TypeSpec

from .fanout import ITEM_TYPE, tolerant
from .names import function_names, io_names, single_return
from .node_task import NodeTask
from .types import json_text, kfp_type

DEFAULT_IMAGE = "interlock-python:latest"  # "python" in the name: kfp-local warns otherwise

_PRELUDE = "from kfp.dsl import *\nfrom typing import *\n"


@dataclass(frozen=True)
class NodeComponent:
    node: str
    function_name: str
    source: str
    component: Any  # kfp PythonComponent
    inputs: dict[str, str]  # port -> KFP input name
    outputs: dict[str, str]  # port -> KFP output name
    declared: dict[str, TypeSpec] | None = None  # declared_inputs(), computed once per node


# dsl.Collected of per-item outputs that travel as JSON text (an Optional, a dict): a KFP list of
# strings, each decoded on the reader's side (types.to_value).
COLLECTED_TEXT = TypeSpec(TypeKind.LIST, args=(TypeSpec(TypeKind.STR),))


def collected_text(spec: PipelineSpec, node: str, src: TypeSpec) -> bool:
    from interlock.core.model.fanout import element_of

    n = spec.node(node)
    elem = element_of(src)
    return n.map is not None and not n.map.tolerant and elem is not None and json_text(elem)


def input_type(spec: PipelineSpec, step: StepSpec, node: str, port: str) -> TypeSpec:
    """The type KFP sees for an input: the port's own, or its producer's where they differ.

    - a binding that picks a dataclass field: KFP cannot index into a Struct output, so the
      whole dataclass crosses and the shim side follows the field path (entry.node_inputs);
    - an Optional producer: its value travels as JSON text (types.json_text);
    - a non-optional producer into an Optional port: the plain type (no JSON text needed);
    - int into float, which interlock allows (as Python typing does) and KFP refuses:
      declared int, widened by the shim side.
    """
    p = step.input(port)
    assert p is not None
    n = spec.node(node)
    if n.map is not None and port == n.map.item:
        return ITEM_TYPE  # one enumerated item per iteration (fanout.py)
    b = n.bindings.get(port)
    while b is not None and b.kind is BindingKind.ONE_OF:  # il.branch_value: every option has one type
        b = b.options[0]
    src: TypeSpec | None = None
    if b is not None and b.kind is BindingKind.OUTPUT:
        src = binding_type(spec, b.__class__.of_output(b.node or "", b.port or ""))  # a map's output: a list
        assert src is not None
        from interlock.core.model.submaps import lifted

        src = lifted(spec, b, src, node) or src  # a mapped call's output outside it: a list (dsl.Collected)
        if b.field:
            return src
        if collected_text(spec, b.node or "", src):
            return COLLECTED_TEXT
    elif b is not None and b.kind is BindingKind.PARAM:
        param = spec.param(b.param or "")
        src = param.type if param else None
    if src is None:
        return p.type
    if src.optional:
        return src
    t = dataclasses.replace(p.type, optional=False)
    if json_text(t) and not json_text(src) and src.kind is t.kind is TypeKind.LIST:
        return src  # list[int] into list[int | None]: the producer's KFP list (the shim widens it)
    if src.kind is TypeKind.INT and t.kind is TypeKind.FLOAT:
        t = dataclasses.replace(t, kind=TypeKind.INT)
    return t


def declared_inputs(spec: PipelineSpec, node: str) -> dict[str, TypeSpec]:
    """port -> the type KFP sees, for the ports the component declares.

    An unbound port whose default is None is not declared at all: the shim uses the default;
    nor is a port of an il.zip after the first: its element comes in the enumerated item.
    """
    step = spec.step_of(node)
    n = spec.node(node)
    bindings = n.bindings
    zipped = n.map.zipped if n.map is not None else ()
    if n.map is not None and n.map.fields:  # fields=: each field comes in the enumerated record
        zipped = (*zipped, *(port for _, port in n.map.fields if port != n.map.item))
    from .submap import item_ports

    zipped = (*zipped, *(item_ports(spec, node) or ()))  # a mapped call's item feeds these too
    return {
        p.name: input_type(spec, step, node, p.name)
        for p in step.inputs
        if (p.name in bindings or not (p.has_default and p.default is None)) and p.name not in zipped
    }


def component_source(spec: PipelineSpec, node: str, function_name: str, launcher: dict[str, Any] | None = None,
                     declared: dict[str, TypeSpec] | None = None) -> str:
    if not spec.ref or spec.ref.startswith("__main__:"):
        raise PipelineDefinitionError(
            "a KFP component imports the pipeline by module name, but this pipeline has no importable ref "
            f"({spec.ref!r})",
            pipeline=spec.name,
            hint="define the pipeline in a module (not a script run as __main__) and refer to it as module:attr",
        )
    step = spec.step_of(node)
    names_in, names_out = io_names(step)
    where = f" (pipeline {spec.name!r}, node {node!r})"
    required: list[str] = []
    optional: list[str] = []
    declared = declared if declared is not None else declared_inputs(spec, node)
    for port, t in declared.items():
        kt = kfp_type(t, where=where)
        if t.is_artifact and t.optional:  # e.g. champion: il.Metrics | None = None, bound
            optional.append(f"{names_in[port]}: {kt.input_annotation()} = None")
        else:
            required.append(f"{names_in[port]}: {kt.input_annotation()}")
    artifact_outs: list[str] = []
    returned: list[str] = []
    for p in step.outputs:
        if p.type.kind is TypeKind.ARTIFACTS:
            raise PipelineDefinitionError(
                f"output {p.name!r} is {p.type.describe()}: a KFP component cannot output a list of artifacts",
                pipeline=spec.name, step=node,
                hint="map the step that makes one artifact with il.map: readers get the list (dsl.Collected)",
            )
        kt = kfp_type(p.type, where=where)
        if kt.is_artifact:
            artifact_outs.append(f"{names_out[p.name]}: {kt.output_annotation()}")
        else:
            returned.append(f"({names_out[p.name]!r}, {kt.parameter})")
    from .submap import CALL_ITEM_ARG, around

    if around(spec, node) is not None:  # a step of a mapped sub-pipeline's body: the call's item
        required.append(f"{CALL_ITEM_ARG}: dict")
    params = ", ".join([*required, *artifact_outs, *optional])
    if tolerant(spec, node):  # il.map(tolerate=...): each item returns an envelope (fanout.py)
        ret = " -> str"
    elif single_return(step):
        ret = f" -> {kfp_type(step.outputs[0].type).parameter}"
    else:
        ret = f" -> NamedTuple('Outputs', [{', '.join(returned)}])" if returned else ""
    args = ", ".join(f"{n!r}: {n}" for n in [*(names_in[p] for p in declared), *(names_out[p.name] for p in step.outputs if p.type.is_artifact),
                                             *([CALL_ITEM_ARG] if around(spec, node) is not None else [])])
    if launcher is not None:  # a distributed step: the task launches its ranks (launcher.py)
        return (
            f"def {function_name}({params}){ret}:\n"
            f"    from interlock.adapters.kfp.launcher import launch_node\n"
            f"    return launch_node({spec.ref!r}, {node!r}, {step.fingerprint!r}, {{{args}}}, {launcher!r})\n"
        )
    # The node's slice of the compiled spec travels with it: the task neither imports the
    # pipeline module nor traces it again (node_task.py).
    task = NodeTask.of(spec, node, declared).compact()
    return (
        f"def {function_name}({params}){ret}:\n"
        f"    from interlock.adapters.kfp.entry import run_node\n"
        f"    return run_node({spec.ref!r}, {node!r}, {step.fingerprint!r}, {{{args}}}, {task!r})\n"
    )


_prelude_names: dict[str, Any] = {}


def _function_from_source(source: str, name: str, filename: str) -> Any:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if not _prelude_names:  # run once: each component's namespace starts from a copy
        exec(compile(_PRELUDE, "<interlock-kfp prelude>", "exec", dont_inherit=True), _prelude_names)
    namespace: dict[str, Any] = {**_prelude_names, "__name__": "interlock_kfp_components"}
    # dont_inherit: this module's `from __future__ import annotations` would turn the
    # annotations into strings, which kfp cannot read.
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)
    return namespace[name]


def make_components(
    spec: PipelineSpec, *, image: str | None = None, launchers: dict[str, dict[str, Any]] | None = None,
) -> dict[str, NodeComponent]:
    """node name -> its generated KFP component."""
    from kfp import dsl

    out: dict[str, NodeComponent] = {}
    for node, fname in function_names(spec).items():
        step = spec.step_of(node)
        declared = declared_inputs(spec, node)
        source = component_source(spec, node, fname, (launchers or {}).get(node), declared)
        fn = _function_from_source(source, fname, f"<interlock-kfp {spec.name}/{node}>")
        comp = dsl.component(
            fn,
            base_image=step.image or image or DEFAULT_IMAGE,
            # The image already holds interlock, kfp and the team's code (see image.py).
            install_kfp_package=False,
        )
        names_in, names_out = io_names(step)
        out[node] = NodeComponent(node, fname, source, comp, names_in, names_out, declared)
    return out
