"""``il.map`` on KFP: ``dsl.ParallelFor`` over the list, results through ``dsl.Collected``.

KFP iterations do not know their index, and the shim names each item's run ``node[i]``
(cache key, checkpoint key, fragment). So a tiny ``enumerate-items`` task turns the list
into ``[{"index": i, "item": v}, ...]`` and the loop iterates that; the per-item component
takes the pair as a ``dict`` and ``run_node`` unpacks it. The loop's ``parallelism`` is the
map's ``concurrency``. Readers of the mapped node's outputs get ``dsl.Collected`` of them.

KFP has no "minimum successes" for a loop, so ``tolerate=`` is emulated by the shim: each
item of a tolerant map ends its KFP task successfully with an envelope, ``{"ok": value}`` or
``{"failed": "KIND: reason"}`` (JSON text; the shim retries the item in-process, since a
task that reports success is never retried by KFP), and a small ``<node>-tolerance`` task
after the loop reads the collected envelopes, fails when more items failed than the map
allows (with the first failure's reason) and otherwise outputs the list with ``None`` at the
failed items. Readers read that task's list, so nothing downstream runs past a broken map.
The item's own fragment still says FAILED, so the receipt and ``RunResult.maps`` are the
same as on every other backend.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.codecs import TypeKind
from interlock.core.model.fanout import item_node
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.types import TypeSpec

ITEM_TYPE = TypeSpec(TypeKind.DICT)  # what the per-item component declares for the item port
ENUMERATE = "enumerate-items"
OUTER = "outer"  # in an enumerated item of a call inside a mapped call: the outer call's item
ENUMERATED = "\0enumerate:"  # among the task names: ENUMERATED + the enumerate task's name -> its map node


# Source text, compiled without this module's `from __future__ import annotations` (kfp reads
# the annotations as types), like every generated component (component.py).
_ENUMERATE_SOURCE = (
    "def enumerate_items(items: list) -> list:\n"
    "    return [{'index': i, 'item': v} for i, v in enumerate(items)]\n"
)


LIST, TEXT, TEXTS = "list", "text", "texts"  # how a list reaches the enumerate task (list_form)


def list_form(spec: PipelineSpec, b: Any) -> str:
    """How the KFP value of a list binding travels: a KFP list (LIST), the list's JSON text (TEXT:
    an Optional element, a tolerant map's output) or a list of JSON texts (TEXTS: ``dsl.Collected``
    of per-item outputs that travel as text)."""
    from interlock.core.model.graph import binding_type
    from interlock.core.model.spec import Binding, BindingKind

    from .component import collected_text
    from .types import json_text

    if b.kind is not BindingKind.OUTPUT:
        return LIST
    src = binding_type(spec, Binding.of_output(b.node or "", b.port or ""))
    if src is None or b.field:
        return LIST
    if collected_text(spec, b.node or "", src):
        return TEXTS
    return TEXT if json_text(src) else LIST


def _enumerate_component(node: str, image: str, carried: dict[str, TypeSpec] | None = None, zipped: int = 0,
                         forms: tuple[str, ...] = (), fields: tuple[str, ...] = (), outer: bool = False) -> Any:
    """``zipped``: how many more lists (il.zip) go into each pair, as ``"zip": [w0, w1, ...]``
    (the lists must have one length); ``carried``: see carried_inputs; ``forms``: each list's
    ``list_form`` (the item's first; all LIST if empty). Elements that travel as JSON text stay
    text in the record (kfp.local cannot pass a list of dicts holding a null), listed by index
    under ``"text"``; ``unpack_item`` decodes them. ``fields`` (fields=): the fields every record
    must have; a record without one fails this task, so no item runs, as on local.

    Named for its map node (``<node>_enumerate_items``): KFP names a task after its component,
    per DAG, and kfp-local tells the map its list's length by the task's name, so two maps of
    one step (one in a sub-pipeline) must not share it.
    """
    from kfp import dsl

    from .component import _function_from_source
    from .names import identifier
    from .types import kfp_type

    fname = f"{identifier(node)}_enumerate_items"
    forms = forms or (LIST,) * (zipped + 1)
    if not carried and not zipped and not fields and not outer and forms[0] == LIST:
        source = _ENUMERATE_SOURCE.replace("def enumerate_items(", f"def {fname}(", 1)
        return dsl.component(_function_from_source(source, fname, "<interlock-kfp enumerate-items>"),
                             base_image=image, install_kfp_package=False)
    carried = carried or {}
    keys = [carried_key(k) for k in range(len(carried))]
    lists = [zip_key(k) for k in range(zipped)]
    kinds = {LIST: "list", TEXT: "str", TEXTS: "list"}
    args = "".join(f", {z}: {kinds[f]}" for z, f in zip(lists, forms[1:], strict=True))
    args += "".join(f", {key}: {kfp_type(t).parameter}" for key, t in zip(keys, carried.values(), strict=True))
    pairs = "".join(f", {key!r}: {key}" for key in keys)
    if outer:  # submap.open_call_loop: the outer call's item, carried on in each item
        args += f", {OUTER}: dict"
        pairs += f", {OUTER!r}: {OUTER}"
    check = "    import json\n" if TEXT in forms else ""
    for name, f in zip(["items", *lists], forms, strict=True):
        if f == TEXT:  # the list's JSON text -> one JSON text per element
            check += f"    {name} = [json.dumps(v) for v in json.loads({name})]\n"
    texts = [k for k, f in enumerate(forms) if f != LIST]
    if texts:
        pairs += f", 'text': {texts!r}"
    if fields:  # each record's fields, before any item runs
        loads = "json.loads(v) if isinstance(v, str) else v" if forms[0] != LIST else "v"
        check += ("    import json\n" if "import json" not in check else "")
        check += (f"    for i, v in enumerate(items):\n        r = {loads}\n"
                  f"        for f in {list(fields)!r}:\n"
                  "            if not isinstance(r, dict) or f not in r:\n"
                  "                raise ValueError(f'item {i}: the item has no field {f!r} (its fields are '\n"
                  "                                 f'{sorted(r) if isinstance(r, dict) else type(r).__name__})')\n")
    if zipped:  # the zip of KFP's own samples: one list of records, each input from its field
        names = ", ".join(["items", *lists])
        pairs += ", 'zip': [" + ", ".join(f"{z}[i]" for z in lists) + "]"
        check += (f"    lengths = [len(x) for x in ({names},)]\n"
                 "    if len(set(lengths)) > 1:\n"
                 "        raise ValueError(f'il.zip over lists of different lengths {lengths}')\n")
    source = (f"def {fname}(items: {kinds[forms[0]]}{args}) -> list:\n{check}"
              f"    return [{{'index': i, 'item': v{pairs}}} for i, v in enumerate(items)]\n")
    filename = (f"<interlock-kfp enumerate-items zipping {zipped} carrying {list(carried)} of {list(forms)}"
                f" reading {list(fields)}{' inside a mapped call' if outer else ''}>")
    fn = _function_from_source(source, fname, filename)
    return dsl.component(fn, base_image=image, install_kfp_package=False)


def zip_key(k: int) -> str:
    return f"z{k}"


CARRIED = "\0carried"  # among the values _task reads: broadcast port -> the loop item's field


def carried_key(k: int) -> str:
    return f"b{k}"


def carried_inputs(spec: PipelineSpec, node_name: str, declared: dict[str, TypeSpec]) -> dict[str, TypeSpec]:
    """The broadcast inputs of a mapped node that kfp-local must receive through the loop item.

    kfp.local 2.17 (``create_parameter_loop_iteration_task_spec``) replaces every task-output
    parameter input of a ParallelFor task with the loop item, so a broadcast step output
    arrives as ``{"index": i, "item": v}``. For kfp-local only, the enumerate task takes those
    outputs as inputs and puts them into every pair (``b0``, ``b1``, ...); the item task reads
    them as fields of the loop item (``item.b0``), which kfp.local resolves. The cluster IR
    keeps the plain broadcast a KFP user writes.
    """
    from interlock.core.model.spec import BindingKind

    from .types import kfp_type

    node = spec.node(node_name)
    assert node.map is not None
    return {port: declared[port] for port, b in node.inputs
            if port not in node.map.ports and port in declared and b.kind in (BindingKind.OUTPUT, BindingKind.ONE_OF)
            and not kfp_type(declared[port]).is_artifact}


class Collected:
    """Stands for a mapped node's task after its loop: its outputs read as ``dsl.Collected``."""

    def __init__(self, task: Any):
        self.task = task
        self.name = task.name

    @property
    def outputs(self) -> dict[str, Any]:
        from kfp import dsl

        return {k: dsl.Collected(v) for k, v in self.task.outputs.items()}


def tolerant(spec: PipelineSpec, node_name: str) -> bool:
    """A mapped node whose items may fail: each item returns an envelope (JSON text)."""
    m = spec.node(node_name).map
    return m is not None and m.tolerant


def check(spec: PipelineSpec, node_name: str) -> None:
    if not tolerant(spec, node_name):
        return
    artifacts = [p.name for p in spec.step_of(node_name).outputs if p.type.is_artifact]
    if artifacts:
        m = spec.node(node_name).map
        raise PipelineDefinitionError(
            f"il.map(tolerate={m.tolerate if m else 0!r}) of a step with an artifact output ({artifacts[0]!r}): "
            "on KFP a failed item's artifact cannot be told from an empty one",
            pipeline=spec.name, step=node_name, port=artifacts[0],
            hint="return the artifact's location (a str) from the mapped step, or drop tolerate= for KFP",
        )


def envelope_ok(value: Any) -> str:
    import json

    return json.dumps({"ok": value})


def envelope_failed(reason: str) -> str:
    import json

    return json.dumps({"failed": reason})


def tolerate_items(envelopes: list[Any], tolerate: float, node: str) -> list[Any]:
    """In the ``<node>-tolerance`` task: the items' values, None at failed ones; raises when
    more items failed than the map allows (the rule of ``MapSpec.allowed_failures``)."""
    import json

    from interlock.core.model.fanout import MapSpec

    results = [json.loads(e) if isinstance(e, str) else e for e in envelopes]
    failed = [i for i, r in enumerate(results) if "failed" in r]
    allowed = MapSpec("item", None, tolerate).allowed_failures(len(results))
    if len(failed) > allowed:
        raise RuntimeError(
            f"il.map {node!r}: {len(failed)} of {len(results)} items failed (indices {failed}); the map allows "
            f"{allowed}. First failure: {results[failed[0]]['failed']}"
        )
    return [r.get("ok") for r in results]


def _tolerance_component(spec: PipelineSpec, node_name: str, image: str) -> Any:
    from kfp import dsl

    from interlock.core.model.fanout import mapped_output

    from .component import _function_from_source
    from .names import identifier
    from .types import json_text

    m = spec.node(node_name).map
    assert m is not None
    outs = spec.step_of(node_name).outputs
    as_text = bool(outs) and json_text(mapped_output(outs[0].type, m))
    fname = f"{identifier(node_name)}_tolerance"
    source = (
        f"def {fname}(items: list) -> {'str' if as_text else 'list'}:\n"
        "    import json\n"
        "    from interlock.adapters.kfp.fanout import tolerate_items\n"
        f"    values = tolerate_items(items, {m.tolerate!r}, {node_name!r})\n"
        f"    return {'json.dumps(values)' if as_text else 'values'}\n"
    )
    fn = _function_from_source(source, fname, f"<interlock-kfp {spec.name}/{node_name} (tolerance)>")
    return dsl.component(fn, base_image=image, install_kfp_package=False)


def gather(spec: PipelineSpec, node_name: str, port: str, declared: TypeSpec, items: list[tuple[Any, TypeSpec]],
           image: str) -> Any:
    """Fan-in from a list written in the body (``total(parts=[a, b, 7])``): KFP cannot pass several
    task outputs as one input, so a small ``<node>-<port>-gather`` task takes each item as its own
    input and outputs the list, in the form the reader declares (a KFP list, or JSON text where
    ``json_text`` says). ``items``: each item's KFP value (a channel or a constant already
    encoded) and the type it was declared with."""
    from .component import _function_from_source
    from .names import identifier
    from .types import json_text, kfp_type

    if declared.kind is TypeKind.ARTIFACTS:
        raise PipelineDefinitionError(
            f"input {port!r} takes a list of artifacts written in the body: KFP can only pass a list of "
            "artifacts from a loop (dsl.Collected)",
            pipeline=spec.name, step=node_name, port=port,
            hint="produce the artifacts with il.map (readers get dsl.Collected), or pass their paths as str",
        )
    fname = f"{identifier(node_name)}_{identifier(port)}_gather"
    args = ", ".join(f"i{k}: {kfp_type(t).parameter}" for k, (_, t) in enumerate(items))
    parts = ", ".join(f"json.loads(i{k})" if json_text(t) else f"i{k}" for k, (_, t) in enumerate(items))
    as_text = json_text(declared)
    source = (
        f"def {fname}({args}) -> {'str' if as_text else 'list'}:\n"
        "    import json\n"
        f"    values = [{parts}]\n"
        f"    return {'json.dumps(values)' if as_text else 'values'}\n"
    )
    from kfp import dsl

    fn = _function_from_source(source, fname, f"<interlock-kfp {spec.name}/{node_name}.{port} (gather)>")
    comp = dsl.component(fn, base_image=image, install_kfp_package=False)
    task = comp(**{f"i{k}": v for k, (v, _) in enumerate(items)})
    task.set_display_name(f"{node_name}-{port}-gather")
    return task.output


class Tolerated:
    """A tolerant mapped node after its loop: readers (and ``.after``) get the tolerance task."""

    def __init__(self, task: Any, output: str | None):
        self.task = task
        self.name = task.name
        self._output = output

    @property
    def outputs(self) -> dict[str, Any]:
        return {self._output: self.task.output} if self._output else {}


def collect(spec: PipelineSpec, node_name: str, task: Any, image: str) -> Any:
    """What readers of a mapped node see after its loop: ``dsl.Collected`` of its outputs, or,
    for a tolerant map, the tolerance task's list."""
    from kfp import dsl

    if not tolerant(spec, node_name):
        return Collected(task)
    from .names import io_names

    outs = spec.step_of(node_name).outputs
    # A failed item's task reports success: KFP's cache would serve that failure on the next run.
    task.set_caching_options(enable_caching=False)
    check_task = _tolerance_component(spec, node_name, image)(items=dsl.Collected(task.output))
    check_task.set_display_name(f"{node_name}-tolerance")
    check_task.set_caching_options(enable_caching=False)
    return Tolerated(check_task, io_names(spec.step_of(node_name))[1][outs[0].name] if outs else None)


def open_loop(spec: PipelineSpec, node_name: str, items: Any, image: str,
              carried: dict[str, tuple[Any, TypeSpec]] | None = None, zipped: tuple[Any, ...] = ()) -> Any:
    """Enter ``ParallelFor`` over the enumerated list; returns (context manager, loop item, the
    enumerate task). ``carried``: broadcast port -> (its KFP channel, its type), put into each
    item (``carried_inputs``); ``zipped``: the other lists of an il.zip, in ``MapSpec.zipped`` order."""
    from kfp import dsl

    check(spec, node_name)
    m = spec.node(node_name).map
    assert m is not None
    carried = carried or {}
    node = spec.node(node_name)
    forms = tuple(list_form(spec, node.bindings[p]) for p in m.ports)
    enum = _enumerate_component(node_name, image, {p: t for p, (_, t) in carried.items()}, len(zipped), forms,
                                tuple(f for f, _ in m.fields))(
        items=items, **{carried_key(k): v for k, (v, _) in enumerate(carried.values())},
        **{zip_key(k): v for k, v in enumerate(zipped)})
    enum.set_display_name(f"{node_name}-{ENUMERATE}")
    enum.set_caching_options(enable_caching=False)
    loop = dsl.ParallelFor(enum.output, parallelism=m.concurrency or 0, name=f"{node_name}-map")
    return loop, loop.__enter__(), enum


def collected_output(spec: PipelineSpec, returned: Any, name: str, b: Any, t: TypeSpec) -> Any:
    """A pipeline output that is a mapped node's list, from what kfp.local's pipeline returned."""
    from .types import to_value

    outputs = dict(getattr(returned, "outputs", None) or {})
    raw = outputs.get(name, outputs.get("Output")) if len(spec.outputs) == 1 else outputs.get(name)
    return to_value(raw, b, t)


@contextlib.contextmanager
def kfp_local_globals_kept() -> Iterator[None]:
    """Keep the process-wide state kfp.local changes per task as it was around a run: the root
    logger's level and handlers, and ``builtins.print``.

    kfp.local saves and restores them per task (``local_logger_context``, ``indented_print``);
    the iterations of a ParallelFor run on threads and interleave those saves, so the root
    logger could be left at INFO with kfp's handler, and ``print`` indented by four spaces,
    for the rest of the process.
    """
    import builtins

    root = logging.getLogger()
    level, handlers, print_ = root.level, root.handlers[:], builtins.print
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
        builtins.print = print_


def stopped(state: Any, node: str) -> bool:
    """A stop marker (FATAL, a spent budget, a stop) ends the node's retries: its own, or (a
    mapped node) one of its items'.

    kfp.local reports an iteration under the loop's task name, not the item's: any stopped
    item fails the map anyway (a tolerant map's items never fail their task), so
    any item's marker stops the retry.
    """
    if state.stop_marker(node) is not None:
        return True
    folder = state.marker_path(node).parent
    prefix = f"{node}["
    return folder.is_dir() and any(
        p.name.startswith(prefix) and state.stop_marker(p.name[: p.name.index("]") + 1]) is not None
        for p in folder.iterdir()
    )


def unpack_item(node: str, raw: Any) -> tuple[str, Any, list[Any]]:
    """The shim's node name for this iteration, its item and (il.zip) the other lists' elements,
    still in their JSON form."""
    pair = raw if isinstance(raw, dict) else {}
    if "index" not in pair or "item" not in pair:
        raise ValueError(f"node {node!r}: expected an enumerated item {{'index': i, 'item': v}}, got {raw!r}")
    import json

    values = [pair["item"], *pair.get("zip", ())]
    for k in pair.get("text", ()):  # elements that travelled as JSON text (_enumerate_component)
        values[int(k)] = json.loads(values[int(k)])  # a KFP struct makes every number a float
    return item_node(node, int(pair["index"])), values[0], values[1:]


def fields_gap(spec: PipelineSpec, mapped: str, items: Any) -> str | None:
    """kfp-local, after a map's enumerate task failed: the first record without a field that
    ``fields=`` reads, said as local says it (the task's own error is in kfp's log only)."""
    import json

    from interlock.core.model.map_fields import field_of
    from interlock.core.model.submaps import mapped_calls

    maps = [n.map for n in spec.nodes if n.name == mapped] + [c.map for c in mapped_calls(spec) if c.name == mapped]
    m = maps[0] if maps else None
    if isinstance(items, str):  # the list as JSON text (list_form TEXT)
        try:
            items = json.loads(items)
        except ValueError:
            return None
    if m is None or not m.fields or not isinstance(items, list):
        return None
    for i, v in enumerate(items):
        for f, _ in m.fields:
            try:
                field_of(json.loads(v) if isinstance(v, str) else v, f, f"item {i}")
            except KeyError as exc:
                return str(exc.args[0])
    return None
