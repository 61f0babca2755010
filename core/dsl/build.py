"""Recording a pipeline body: promises, the builder, and ``il.when``.

Inside ``@il.pipeline`` nothing runs. Each step call becomes a Node whose inputs are
Bindings, and returns Promises that stand for outputs that will exist at run time. Type
checks happen here, edge by edge, so the error points at the line that wired it.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.base.suggest import did_you_mean
from interlock.core.dsl.conditions import Condition, as_cond, combine, compare
from interlock.core.model.codecs import TypeKind, is_structured, to_jsonable, value_matches
from interlock.core.model.conditions import Cond, Op
from interlock.core.model.fanout import element_of, mapped_output
from interlock.core.model.joins import DEFAULT, READS_MISSING, check_run_if
from interlock.core.model.pipeline_spec import Gate, Node
from interlock.core.model.spec import Binding, BindingKind
from interlock.core.model.types import TypeSpec, assignable

if TYPE_CHECKING:
    from interlock.core.dsl.step import Step

_builder: contextvars.ContextVar[Builder | None] = contextvars.ContextVar("interlock_builder", default=None)


def current_builder() -> Builder | None:
    return _builder.get()


class Promise:
    """A value that exists only at run time: a pipeline parameter or a step output."""

    def __init__(self, builder: Builder, binding: Binding, type_: TypeSpec):
        self._builder = builder
        self._binding = binding
        self._type = type_

    @property
    def binding(self) -> Binding:
        return self._binding

    @property
    def type(self) -> TypeSpec:
        return self._type

    def describe(self) -> str:
        return self._binding.describe()

    def __getattr__(self, name: str) -> Promise:
        if name.startswith("_"):
            raise AttributeError(name)
        t = self._type
        ft = t.field_type(name) if t.kind is TypeKind.DATACLASS else None
        if ft is None or self._binding.kind is not BindingKind.OUTPUT:
            raise PipelineDefinitionError(
                f"{self.describe()} of type {t.describe()} has no field {name!r}",
                pipeline=self._builder.name,
            )
        b = self._binding
        return Promise(self._builder, Binding.of_output(b.node or "", b.port or "", (*b.field, name)), ft)

    # -- conditions: `n > 5`, `flip == "heads"`, `a & ~b` build a Condition for il.when ----------
    def __eq__(self, other: object) -> Any:
        return compare(Op.EQ, self, other)

    def __ne__(self, other: object) -> Any:
        return compare(Op.NE, self, other)

    def __lt__(self, other: Any) -> Any:
        return compare(Op.LT, self, other)

    def __le__(self, other: Any) -> Any:
        return compare(Op.LE, self, other)

    def __gt__(self, other: Any) -> Any:
        return compare(Op.GT, self, other)

    def __ge__(self, other: Any) -> Any:
        return compare(Op.GE, self, other)

    __hash__ = object.__hash__  # still usable as a dict key or in a set: identity

    def __and__(self, other: Any) -> Any:
        return combine(Op.AND, self._as_condition(), other)

    def __rand__(self, other: Any) -> Any:
        return combine(Op.AND, other, self._as_condition())

    def __or__(self, other: Any) -> Any:
        return combine(Op.OR, self._as_condition(), other)

    def __ror__(self, other: Any) -> Any:
        return combine(Op.OR, other, self._as_condition())

    def __invert__(self) -> Any:
        return ~self._as_condition()

    def _as_condition(self) -> Any:
        return Condition(as_cond(self, self._builder.name), self._builder.name, self._builder)

    # -- a promise has no value while the body runs: refuse what would need one ------------------
    def _no_value(self, what: str, instead: str) -> PipelineDefinitionError:
        b = self._binding
        return PipelineDefinitionError(
            f"{what} {self.describe()}, which has no value while the pipeline is being built",
            pipeline=self._builder.name, step=b.node if b.kind is BindingKind.OUTPUT else None,
            hint=instead,
        )

    def __bool__(self) -> bool:
        raise self._no_value(
            "`if`, `and`, `or`, `not` or bool() on",
            "use `with il.when(flag):` (or il.when(x > 5), il.when(a & ~b)) to run steps only when it holds",
        )

    # interlock has no dynamic graphs (Flyte @dynamic): the graph is fixed when the body runs.
    _PER_ITEM = ("to run a step per item, use il.map (fan-out); to choose steps by a value, use "
                 "il.when/il.elif_/il.otherwise; otherwise process the items inside one step")

    def __iter__(self) -> Iterator[Any]:
        raise self._no_value("cannot iterate (`for`, unpacking, list()) over", self._PER_ITEM)

    def __index__(self) -> int:
        raise self._no_value("range(), indexing or slicing with", self._PER_ITEM)

    def __len__(self) -> int:
        raise self._no_value("len() of", "compute the length inside a step, or make it an output")

    def __contains__(self, item: Any) -> bool:
        raise self._no_value("`in` on", "test membership inside a step that returns a bool, then il.when on it")

    _TEXT = "build the text inside a step that takes this value as an input (a promise in a string is not wired)"

    def __str__(self) -> str:
        raise self._no_value("str() or %-formatting of", self._TEXT)

    def __format__(self, spec: str) -> str:
        raise self._no_value("an f-string or str.format() with", self._TEXT)

    def __mod__(self, other: Any) -> Any:
        raise self._no_value("`%` with", self._TEXT)

    def __rmod__(self, other: Any) -> Any:
        raise self._no_value("`%` with", self._TEXT)

    def __add__(self, other: Any) -> Any:
        raise self._no_value("`+` with", "do arithmetic and string joins inside a step")

    def __radd__(self, other: Any) -> Any:
        raise self._no_value("`+` with", "do arithmetic and string joins inside a step")

    def __repr__(self) -> str:
        return f"<promise {self.describe()}: {self._type.describe()}>"


class Outputs(tuple):
    """Several outputs of one node: unpack it like a tuple or use attribute names."""

    _names: tuple[str, ...]

    def __new__(cls, promises: list[Promise], names: list[str]) -> Outputs:
        obj = super().__new__(cls, promises)
        obj._names = tuple(names)
        return obj

    def __getattr__(self, name: str) -> Promise:
        try:
            promise: Promise = self[self._names.index(name)]
            return promise
        except ValueError:
            raise AttributeError(f"no output named {name!r}; outputs: {list(self._names)}") from None


class NodeHandle:
    """What a step with no outputs returns: useful only to order steps (``after=``)."""

    def __init__(self, node: str):
        self.node = node


class CallHandle(NodeHandle):
    """What a sub-pipeline call with no outputs returns: ``after=`` it waits for the whole call."""

    def __init__(self, nodes: tuple[str, ...]):
        super().__init__(nodes[-1])
        self.nodes = nodes


_CORE = str(Path(__file__).resolve().parents[1])  # interlock's core: never the author's line


def author_site() -> str | None:
    """``file.py:line`` of the innermost frame outside interlock's core: the author's own line."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_CORE):
        frame = frame.f_back  # type: ignore[assignment]
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}" if frame is not None else None


class Builder:
    def __init__(self, name: str):
        self.name = name
        self.nodes: list[Node] = []
        self.steps: dict[str, Step] = {}
        self.gates: list[Gate] = []
        self._gate_stack: list[str] = []
        # Every recorded node's name -> its gate: also the index of taken names (a linear scan
        # of ``nodes`` per call made recording N steps O(N^2)).
        self._node_gate: dict[str, str | None] = {}
        self._next_suffix: dict[str, int] = {}  # base name -> first "-<i>" suffix that may be free
        self.last_block: tuple[str, int, int] | None = None  # (gate id, node count, gate count) at its end
        self.finally_node: Node | None = None  # il.finally_ (core/dsl/finally_.py)
        self.subs: list[Any] = []  # sub-pipeline calls (core/dsl/subpipeline.py SubCall)
        self._sub_stack: list[str] = []  # the calls being recorded, outermost first
        # il.finally_ bookkeeping (core/dsl/finally_.py, core/dsl/subpipeline.py): the whole-body finally
        # not yet known to scope a block, whether a `with il.finally_` block is open, the blocks
        # recorded, and for each sub-pipeline call being recorded the depth of the caller's gates.
        self.finally_pending: Node | None = None
        self.finally_open = 0  # how many `with il.finally_` blocks are open (they nest)
        self.attempts: list[Any] = []  # il.attempt() blocks (core/dsl/attempt.py)
        self.attempt_open = False
        self.finally_blocks: list[Any] = []  # FinallyBlock
        self.failure_handlers: list[str] = []  # il.on_failure: finally steps that run only on a failure
        self.sub_gate_depths: list[int] = []
        self.wiring_errors: list[PipelineDefinitionError] = []  # every step call's, in order

    def raise_wiring_errors(self, also: PipelineDefinitionError | None = None) -> None:
        """Raise the first wiring mistake recorded (then ``also``), listing every other one in it."""
        found = [*self.wiring_errors, *([also] if also is not None else [])]
        if not found:
            return
        first, rest = found[0], found[1:]
        if rest:
            more = "".join(f"\n  also: {e.message}" + (f" ({e.hint})" if e.hint else "") for e in rest)
            first._message = f"{first.message}{more}"
            first.more = tuple(rest)
        raise first

    def sub_prefix(self) -> str:
        """What a node name gets in front inside a sub-pipeline call ("prep." in call "prep")."""
        return f"{self._sub_stack[-1]}." if self._sub_stack else ""

    # -- recording ---------------------------------------------------------------------
    def add_node(self, step: Step, kwargs: dict[str, Any], node_name: str | None, map_spec: Any = None) -> Any:
        spec = step.spec
        known = self.steps.get(spec.name)
        if known is not None and known.fn is not step.fn:
            raise PipelineDefinitionError(
                "two different functions share the step name", pipeline=self.name, step=spec.name,
                hint="give one of them @il.step(name=...)",
            )
        self.steps[spec.name] = step
        prefix = self.sub_prefix()
        name = prefix + node_name if node_name else self._fresh_name(prefix + spec.name)
        if self._taken(name):
            raise PipelineDefinitionError(
                "duplicate node name", pipeline=self.name, step=name,
                hint=f"use {spec.name}.named('another-name')(...) for the second call",
            )

        # `after=` orders steps without data; a real input named "after" wins. So for `run_if=`.
        after = kwargs.pop("after", None) if spec.input("after") is None else None
        after_nodes = self._after_nodes(after, name)
        run_if = kwargs.pop("run_if", None) if spec.input("run_if") is None else None
        rule = check_run_if(run_if, pipeline=self.name, step=name) if run_if is not None else (
            check_run_if(step.run_if) if getattr(step, "run_if", None) else None)
        # Wiring mistakes are collected, not raised: the node is still recorded, so the body goes
        # on and the build reports every mistake at once (pipeline.py raises them together).
        unknown = [k for k in kwargs if spec.input(k) is None]
        if unknown:
            inputs = [p.name for p in spec.inputs]
            self.wiring_errors.append(PipelineDefinitionError(
                f"unknown argument(s) {unknown}; inputs are {inputs}",
                pipeline=self.name, step=name, port=unknown[0], hint=did_you_mean(unknown[0], inputs),
            ))
        bindings: list[tuple[str, Binding]] = []
        for port in spec.inputs:
            if port.name not in kwargs:
                if not port.has_default and not (map_spec is not None and port.name in map_spec.takes):  # fields=
                    self.wiring_errors.append(PipelineDefinitionError(
                        f"missing required input of type {port.type.describe()}",
                        pipeline=self.name, step=name, port=port.name,
                    ))
                continue
            # il.map: the item input is bound to the whole list (core/model/fanout.py).
            want = map_spec.list_type(port.type) if map_spec is not None and port.name in map_spec.ports else port.type
            try:
                bindings.append((port.name, self._bind(kwargs[port.name], name, port.name, want,
                                                       reads_missing=rule in READS_MISSING and port.type.optional)))
            except PipelineDefinitionError as exc:
                self.wiring_errors.append(exc)

        gate = self._gate_stack[-1] if self._gate_stack else None
        node = Node(name=name, step=spec.name, inputs=tuple(bindings), gate=gate, after=after_nodes, map=map_spec,
                    run_if=rule.value if rule is not None and rule is not DEFAULT else None)
        self.nodes.append(node)
        self._node_gate[name] = gate
        return self._promises_for(node, spec)

    def _taken(self, name: str) -> bool:
        """A node or a sub-pipeline call has this name (an index: building stays linear)."""
        return name in self._node_gate or any(s.name == name for s in self.subs)

    def _fresh_name(self, base: str) -> str:
        if not self._taken(base):
            return base
        # Names are only taken, never freed (il.finally_ drops the node it just recorded, which
        # holds the latest suffix), so the search resumes where the last one stopped.
        i = self._next_suffix.get(base, 2)
        while self._taken(f"{base}-{i}"):
            i += 1
        self._next_suffix[base] = i
        return f"{base}-{i}"

    def _after_nodes(self, after: Any, node: str) -> tuple[str, ...]:
        if after is None:
            return ()
        items = after if isinstance(after, list | tuple) and not isinstance(after, Outputs) else [after]
        out: list[str] = []
        for item in items:
            if isinstance(item, CallHandle):
                out.extend(item.nodes)
            elif isinstance(item, NodeHandle):
                out.append(item.node)
            elif isinstance(item, Promise) and item.binding.kind is BindingKind.OUTPUT:
                out.append(item.binding.node or "")
            elif isinstance(item, Outputs) and item:
                out.append(item[0].binding.node or "")
            else:
                raise PipelineDefinitionError(f"after={item!r} is not a step call", pipeline=self.name, step=node)
        return tuple(out)

    def _bind(self, value: Any, node: str, port: str, dst: TypeSpec, *, reads_missing: bool = False) -> Binding:
        """``reads_missing``: the step's join rule runs it when an upstream produced nothing, and
        the input is Optional (it reads None then): it may read from inside an il.when block."""
        if isinstance(value, Outputs):
            raise PipelineDefinitionError(
                f"got all outputs {list(value._names)} of a step; pick one (e.g. result.{value._names[0]})",
                pipeline=self.name, step=node, port=port,
            )
        if isinstance(value, NodeHandle):
            raise PipelineDefinitionError(
                f"step {value.node!r} has no outputs to pass; use after=... to order steps",
                pipeline=self.name, step=node, port=port,
            )
        if isinstance(value, Promise):
            if value._builder is not self:
                raise PipelineDefinitionError(
                    f"{value.describe()} belongs to pipeline {value._builder.name!r}; "
                    "a step output cannot be used outside its pipeline",
                    pipeline=self.name, step=node, port=port,
                )
            if not assignable(value.type, dst):
                bare = value.type.kind is dst.kind and not value.type.args and dst.args  # `-> list` into list[str]
                raise PipelineDefinitionError(
                    f"type mismatch: {value.describe()} is {value.type.describe()}, "
                    f"but the input expects {dst.describe()}",
                    pipeline=self.name, step=node, port=port,
                    hint=f"annotate the return type of step {value.binding.node!r} as {dst.describe()} (an untyped "
                    f"{value.type.describe()} may hold anything)" if bare and value.binding.node else None,
                )
            b = value.binding
            if b.kind is BindingKind.ONE_OF:
                from interlock.core.dsl.branches import check_value_in_scope

                check_value_in_scope(self, b, node, port)
            if b.kind is BindingKind.OUTPUT:
                src_gate = self._node_gate.get(b.node or "")
                if src_gate is not None and src_gate not in self._gate_stack and not reads_missing:
                    raise PipelineDefinitionError(
                        f"{value.describe()} is produced inside an il.when block and may not exist here",
                        pipeline=self.name, step=node, port=port,
                        hint='move this step into the same il.when block, or join the branches: run_if="any_succeeded" '
                        "with this input Optional (it reads None when the block did not run)",
                    )
            return b
        if isinstance(value, list | tuple) and _holds_promise(value) and element_of(dst) is not None:
            from interlock.core.dsl.fanout import bind_list

            return bind_list(self, value, node, port, dst)
        if _holds_promise(value):
            raise PipelineDefinitionError(
                "a step output or parameter nested inside a list or dict constant cannot be wired",
                pipeline=self.name, step=node, port=port,
                hint="pass each runtime value as its own input, or build the collection in a step",
            )
        if is_structured(value) and value_matches(value, dst):
            return Binding.of_const(to_jsonable(value, dst))
        if not value_matches(value, dst):
            raise PipelineDefinitionError(
                f"type mismatch: constant {value!r} ({type(value).__name__}) does not fit {dst.describe()}",
                pipeline=self.name, step=node, port=port,
            )
        return Binding.of_const(list(value) if isinstance(value, tuple) else value)

    def _promises_for(self, node: Node, spec: Any) -> Any:
        promises = [
            Promise(self, Binding.of_output(node.name, p.name),
                    mapped_output(p.type, node.map, spec.may_skip) if node.map is not None else p.type)
            for p in spec.outputs
        ]
        if not promises:
            return NodeHandle(node.name)
        if spec.output_tuple:
            return Outputs(promises, [p.name for p in spec.outputs])
        return promises[0]

    # -- gates -------------------------------------------------------------------------
    def condition_for(self, condition: Any) -> tuple[Cond, bool]:
        """The block condition, and whether it is a plain bool output (the original spec form)."""
        legacy = (isinstance(condition, Promise) and condition.binding.kind is BindingKind.OUTPUT
                  and condition.type.kind is TypeKind.BOOL and not condition.type.optional)
        cond = Cond.ref(condition.binding) if legacy else as_cond(condition, self.name)
        if self._sub_stack:  # a sub-pipeline's parameter may be bound to a constant by its caller
            from interlock.core.dsl.subpipeline import refuse_constant_condition

            refuse_constant_condition(self, cond)
        for b in cond.bindings():
            src_gate = self._node_gate.get(b.node or "") if b.kind is BindingKind.OUTPUT else None
            if src_gate is not None and src_gate not in self._gate_stack:
                raise PipelineDefinitionError(
                    f"{b.describe()} is produced inside another il.when block", pipeline=self.name
                )
        return cond, legacy

    def when(self, condition: Any) -> contextlib.AbstractContextManager[None]:
        cond, legacy = self.condition_for(condition)
        gate = Gate(
            id=f"gate-{len(self.gates) + 1}",
            # A plain il.when(flag) keeps the original spec form; anything else is an expression.
            condition=condition.binding if legacy else Binding.of_const(None),
            parent=self._gate_stack[-1] if self._gate_stack else None,
            expr=None if legacy else cond,
            source=author_site(),
        )
        return self.block(gate, cond.describe())

    @contextlib.contextmanager
    def block(self, gate: Gate, label: str) -> Iterator[None]:
        """Record the steps of a ``with`` block as gated by ``gate``."""
        self.gates.append(gate)
        self._gate_stack.append(gate.id)
        start = len(self.nodes)  # a node gated by this block can only be recorded inside it
        try:
            yield
        finally:
            self._gate_stack.pop()
        if not any(n.gate == gate.id for n in self.nodes[start:]):
            raise PipelineDefinitionError(f"il.when({label}) block has no steps", pipeline=self.name)
        # il.elif_/il.otherwise may follow this block only if nothing is recorded in between.
        self.last_block = (gate.id, len(self.nodes), len(self.gates))


def _holds_promise(value: Any) -> bool:
    if isinstance(value, Promise):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_promise(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_promise(v) for v in value.values())
    return False


@contextlib.contextmanager
def building(builder: Builder) -> Iterator[Builder]:
    if _builder.get() is not None:
        raise PipelineDefinitionError(
            f"pipeline {builder.name!r} is built inside pipeline {_builder.get().name!r}",  # type: ignore[union-attr]
            hint="call steps, not pipelines, inside a pipeline body",
        )
    token = _builder.set(builder)
    try:
        yield builder
    finally:
        _builder.reset(token)


def when(condition: Any) -> contextlib.AbstractContextManager[None]:
    """Run the steps in the ``with`` block only when ``condition`` holds at run time.

    ``condition``: a bool step output or bool parameter, a comparison of an output or
    parameter (``n > 5``, ``flip == "heads"``, ``a < b``), or ``&``/``|``/``~`` of those.
    """
    builder = current_builder()
    if builder is None:
        raise PipelineDefinitionError("il.when is only meaningful inside an @il.pipeline function")
    return builder.when(condition)
