"""The Flyte 2 module of a pipeline, as Python source, rendered from the lowered plan.

Its parts: the spec (JSON, read back with ``PipelineSpec.loads``), one ``TaskEnvironment``
per group of steps (``policies.env_key``), one task per node calling the shim
(``task.run_step``), and the driver task: the plan's units as Python statements (``emit``),
with ``driver.Driver`` keeping the books. Linear in the number of nodes: each unit is
written once, and nothing walks the graph again.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

from interlock.core.backend.plan import SUB, Block, Call, Chain, FinallyScope, Step, Unit, lower
from interlock.core.base.status import FailureKind
from interlock.core.model.codecs import TypeKind
from interlock.core.model.pipeline_spec import PipelineSpec
from interlock.core.model.submaps import outermost
from interlock.core.run.env import RunEnv

from . import policies
from .distributed import PLUGIN_IMPORT
from .triggers import time_params, trigger_sources

PRIMITIVES = {TypeKind.INT: "int", TypeKind.FLOAT: "float", TypeKind.STR: "str", TypeKind.BOOL: "bool"}


def env_name(text: str) -> str:
    """A TaskEnvironment name (snake or kebab case)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "pipeline"


def py_name(prefix: str, text: str, taken: set[str]) -> str:
    base = prefix + re.sub(r"\W", "_", text)
    name, n = base, 1
    while name in taken or keyword.iskeyword(name):
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def render(spec: PipelineSpec, *, store: str, image: str | None = None,
           in_process: frozenset[FailureKind] = frozenset(), backend: str = "flyte2", concurrent: bool = True,
           triggers: bool = True) -> str:
    """The module's source. ``store``: the value store every task reads and writes
    (``values.py``); ``in_process``: the failure kinds the shim retries itself; ``concurrent``:
    steps of one scope that do not depend on each other are awaited together (``asyncio.gather``,
    as a Flyte 2 user writes a driver), else one after another in plan order (flyte2-local:
    the same statuses as local when one of them fails); ``triggers``: the pipeline's time
    triggers on the driver (flyte2-local leaves them to ``interlock watch``)."""
    plan = lower(spec)
    nodes = [*plan.nodes(), *spec.finally_nodes()]
    env_vars = RunEnv(pipeline=spec.name, backend=backend, retry_in_process=in_process,
                      on_cluster=not in_process or None).to_env()
    envs: dict[tuple[Any, ...], str] = {}
    env_lines: list[str] = []
    tasks: dict[str, str] = {}
    task_lines: list[str] = []
    taken: set[str] = set()
    pods = torch = False
    for node in nodes:
        step = spec.step_of(node)
        key = policies.env_key(step, image)
        if key not in envs:
            envs[key] = var = f"env_{len(envs)}"
            args = [f"name={env_name(f'{spec.name}-{len(envs) - 1}')!r}"]
            img, res, sec, env, plugin = key
            if img:
                args.append(f"image={img!r}")
            if res:
                args.append(f"resources={res}")
            if sec:
                args.append(f"secrets={sec}")
            args.append(f"env_vars={ {**dict(env), **env_vars}!r}")
            if plugin:  # a distributed step's: the SDK's PyTorch plugin (distributed.py)
                args.append(f"plugin_config={plugin}")
                torch = True
            env_lines.append(f"{var} = flyte.TaskEnvironment({', '.join(args)})")
        fn = tasks[node.name] = py_name("step_", node.name, taken)
        # one task for every item (a map's, or a mapped call's body step): each call names its item (node)
        mapped = node.map is not None or outermost(spec, node.name) is not None
        kw = policies.task_kwargs(step, in_process, mapped=mapped)
        pods = pods or "pod_template" in kw
        deco = ", ".join([f"short_name={node.name!r}", *(f"{k}={v}" for k, v in kw.items())])
        ports = [p.name for p in step.inputs]
        sig = ", ".join([*(["node: str"] if mapped else []), *(f"{p}: str = ''" for p in ports)])
        refs = ", ".join(f"{p!r}: {p}" for p in ports)
        if step.distributed is not None:  # each worker calls it, pickled: a plain function, awaited through .aio
            tasks[node.name] = f"{fn}.aio"
            fn_lines = [f"def {fn}({sig}) -> str:",
                    f"    return _il_ddp.run_ranks(SPEC, STORE, {node.name!r}, {{{refs}}})"]
        else:
            fn_lines = [f"async def {fn}({sig}) -> str:",
                    f"    return await _il_task.run_step(SPEC, STORE, {node.name!r}, "
                    f"{'node' if mapped else repr(node.name)}, {{{refs}}})"]
        task_lines += [f"@{envs[key]}.task({deco})", *fn_lines, ""]
    calls = _calls(plan.units)
    for unit in calls:
        tasks[SUB + unit.call.name] = py_name("call_", unit.call.name, taken)
    call_lines: list[str] = []
    for unit in calls:
        inner: list[str] = []
        emit(unit.units, tasks, inner, "    ", concurrent)
        call_lines += [
            f"@driver_env.task(short_name={(SUB + unit.call.name)!r})",
            f"async def {tasks[SUB + unit.call.name]}(books: str) -> str:",
            f'    """Sub-pipeline {unit.call.pipeline!r}, called as {unit.call.name!r}: a nested driver."""',
            "    d = _il.Driver.resume(SPEC, books, STORE)",
            *inner,
            "    return d.returned()",
            "",
        ]
    driver = py_name("", env_name(spec.name).replace("-", "_"), taken)
    rendered = trigger_sources(spec, env_name(spec.name)) if triggers else []
    # A parameter a trigger binds its time to is a datetime input, as the SDK binds flyte.TriggerTime;
    # the driver hands the pipeline its ISO 8601 text (the pipeline's default when none is given).
    timed = time_params(spec) if rendered else set()
    params = []
    for p in spec.params:
        kind = PRIMITIVES.get(p.type.kind)
        if p.name in timed:
            params.append(f"{p.name}: datetime | None = None" if p.has_default else f"{p.name}: datetime")
        elif p.has_default:
            default = repr(p.default) if kind else repr(json.dumps(p.default))
            params.append(f"{p.name}: {kind or 'str'} = {default}")
        else:
            params.append(f"{p.name}: {kind or 'str'}")
    loads = {p.name for p in spec.params if p.type.kind not in PRIMITIVES}

    def value(p: Any) -> str:
        if p.name in timed:
            return f"{p.name}.isoformat()" + (f" if {p.name} is not None else {p.default!r}" if p.has_default else "")
        return f"json.loads({p.name})" if p.name in loads else p.name

    given = ", ".join(f"{p.name!r}: {value(p)}" for p in spec.params)
    deco = f"@driver_env.task(triggers=({', '.join(rendered)},))" if rendered else "@driver_env.task"
    body: list[str] = []
    # il.attempt(): the driver's books are its try/except (Driver.tries): a failed step of the block
    # ends it without failing the driver task, and the fallback's steps start only then.
    notes = {n: f"# {what}" for a in spec.attempts for n, what in (
        (a.members[0], f"try: il.attempt() {a.name} (a failure here is handled by its fallback)"),
        (a.fallback[0], f"except: the fallback of {a.name} (runs only if it failed)"))}
    emit(plan.units, tasks, body, "        ", concurrent, notes)
    finals = ", ".join(f"{n.name!r}: {tasks[n.name]}" for n in spec.finally_nodes())
    header = [
        f'"""The `flyte` SDK module of pipeline {spec.name!r}, generated by interlock (`interlock compile --backend '
        f'flyte2`).',
        "",
        f"Deploy it as it is: `flyte deploy {{this file}} {driver}`, or run it: `flyte run {{this file}} {driver}`.",
        "Each step's task runs interlock's shim; the driver task is the pipeline, in plan order.",
        '"""',
        "",
        "import asyncio",
        "import json",
        "from datetime import datetime, timedelta" if timed or "datetime.fromisoformat" in deco
        else "from datetime import timedelta",
        "",
        "import flyte",
        *([PLUGIN_IMPORT] if torch else []),
        *(["from kubernetes.client import V1Container, V1PodSpec, V1Toleration"] if pods else []),
        "",
        "from interlock.adapters.flyte2 import driver as _il, task as _il_task",
        *(["from interlock.adapters.flyte2 import distributed as _il_ddp"] if torch else []),
        "from interlock.core.model.pipeline_spec import PipelineSpec",
        "",
        f"SPEC = PipelineSpec.loads({spec.dumps()!r})",
        f"STORE = {store!r}  # the value store: a path every task can read (a shared volume on a cluster)",
        "",
        *env_lines,
        f"driver_env = flyte.TaskEnvironment(name={env_name(spec.name + '-driver')!r}"
        + (f", image={image!r}" if image else "")
        + f", env_vars={env_vars!r}, depends_on=[{', '.join(envs.values())}])",
        "",
        "",
        *task_lines,
        *call_lines,
        "",
        deco,
        f"async def {driver}({', '.join(params)}) -> str:",
        f"    d = _il.Driver(SPEC, {{{given}}}, STORE)",
        "    try:",
        *(body or ["        pass"]),
        "    finally:",
        f"        await d.finish({{{finals}}})",
        "    return d.result()",
        "",
        f"DRIVER = {driver}",
        "",
    ]
    return "\n".join(header)


def emit(units: tuple[Unit, ...], tasks: dict[str, str], out: list[str], pad: str, concurrent: bool,
         notes: dict[str, str] | None = None) -> None:
    """One statement per unit, recursing into nested scopes; with ``concurrent``, a run of steps
    none of which reads another is one ``asyncio.gather`` (the driver's books start each one
    before any ends, so which of them run never depends on timing). ``notes``: a comment before
    a node's statement (where an il.attempt() block and its fallback start: the top level)."""
    wave: list[str] = []

    def flush() -> None:
        if len(wave) == 1:
            out.append(f"{pad}await {wave[0]}")
        elif wave:
            out.append(f"{pad}await asyncio.gather(  # independent steps, at once")
            out.extend(f"{pad}    {call}," for call in wave)
            out.append(f"{pad})")
        wave.clear()
        members.clear()

    members: set[str] = set()
    for unit in units:
        if isinstance(unit, Step):
            if not concurrent or unit.node.upstream() & members:
                flush()
            if notes and unit.node.name in notes:
                flush()
                out.append(f"{pad}{notes[unit.node.name]}")
            wave.append(f"d.step({unit.node.name!r}, {tasks[unit.node.name]})")
            members.add(unit.node.name)
            continue
        flush()
        if isinstance(unit, Block):
            out.append(f"{pad}if d.opens({unit.gate.id!r}):  # {_label(unit)}")
            _inner(unit.units, tasks, out, pad, concurrent)
        elif isinstance(unit, Chain):
            for i, block in enumerate(unit.blocks):
                out.append(f"{pad}{'if' if i == 0 else 'elif'} d.opens({block.gate.id!r}):  # {_label(block)}")
                _inner(block.units, tasks, out, pad, concurrent)
        elif isinstance(unit, Call) and unit.call.map is not None:  # its driver task once per item (submap.py)
            out.append(f"{pad}await d.call_map({unit.call.name!r}, {tasks[SUB + unit.call.name]})"
                       f"  # il.map over sub-pipeline {unit.call.pipeline!r}")
        elif isinstance(unit, Call):  # its own driver task (call_tasks), handed the books
            out.append(f"{pad}await d.call({unit.call.name!r}, {tasks[SUB + unit.call.name]})"
                       f"  # sub-pipeline {unit.call.pipeline!r}")
        elif isinstance(unit, FinallyScope):  # the block's step as it ends
            name = unit.block.node.name
            out.append(f"{pad}try:  # with il.finally_({name})")
            _inner(unit.units, tasks, out, pad, concurrent)
            out.append(f"{pad}finally:")
            out.append(f"{pad}    await d.close({name!r}, {tasks[name]})")
    flush()


def _calls(units: tuple[Unit, ...]) -> list[Call]:
    """Every sub-pipeline call, nested ones too, innermost first (each task defined before its caller)."""
    found: list[Call] = []
    for unit in units:
        if isinstance(unit, Call):
            found += [*_calls(unit.units), unit]
        elif isinstance(unit, Block):
            found += _calls(unit.units)
        elif isinstance(unit, Chain):
            for block in unit.blocks:
                found += _calls(block.units)
        elif isinstance(unit, FinallyScope):
            found += _calls(unit.units)
    return found


def _inner(units: tuple[Unit, ...], tasks: dict[str, str], out: list[str], pad: str, concurrent: bool) -> None:
    before = len(out)
    emit(units, tasks, out, pad + "    ", concurrent)
    if len(out) == before:
        out.append(pad + "    pass")


def _label(block: Block) -> str:
    from interlock.core.model.conditions import gate_label

    return gate_label(block.gate).replace("\n", " ")
