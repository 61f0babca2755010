"""Property tests over random DAG shapes.

Two generators: PipelineSpecs built directly from random edges, types, gates and policies
(shapes the builder would never produce in a test by hand), and real ``@il.pipeline``
functions wired at random from a drawn plan. For both: the spec survives a JSON round trip
unchanged and the topological order respects every edge (data, ``after=`` and il.when).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from typing import Any

import pytest
from core_pipelines import arith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import interlock as il
from interlock.core.model.graph import topological_order, validate
from interlock.core.model.pipeline_spec import Gate, Node, PipelineSpec
from interlock.core.model.policies_opt_in import Toleration
from interlock.core.model.spec import Binding, Port, StepSpec
from interlock.core.model.types import TypeSpec

# The suite's autouse env fixture is function-scoped; it is the same for every example.
PROPS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])

INT, FLOAT, STR, BOOL = TypeSpec("int"), TypeSpec("float"), TypeSpec("str"), TypeSpec("bool")
PARAMS_DC = TypeSpec("dataclass", name="team.pipelines:TrainParams", fields=(("lr", FLOAT), ("deep", BOOL)))
PORT_TYPES = [
    INT, FLOAT, STR, BOOL,
    TypeSpec("list", args=(INT,)),
    TypeSpec("dict", args=(STR, FLOAT)),
    TypeSpec("int", optional=True),
    TypeSpec("list"),
    TypeSpec("dataframe"), TypeSpec("dataset"), TypeSpec("model"), TypeSpec("metrics"),
    PARAMS_DC,
]
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
)
CONSTS: dict[str, Any] = {
    "int": st.integers(-1000, 1000),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.text(max_size=20),
    "bool": st.booleans(),
}


# -- policies ------------------------------------------------------------------------------------
@st.composite
def resources(draw: st.DrawFn) -> il.Resources:
    gpu = draw(st.sampled_from([0, 0, 1, 8]))
    return il.Resources(
        cpu=draw(st.sampled_from([None, "500m", "2", 4, 0.5])),
        memory=draw(st.sampled_from([None, "512Mi", "4Gi", "1e9"])),
        gpu=gpu,
        accelerator=draw(st.sampled_from(["nvidia-h200", "nvidia-tesla-t4"])) if gpu else None,
        shared_memory=draw(st.sampled_from([None, "2Gi"])),
        ephemeral_storage=draw(st.sampled_from([None, "100Gi"])),
        node_selector=draw(st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["gpu", "a"]), max_size=2)),
        tolerations=draw(st.lists(st.builds(
            Toleration, key=st.sampled_from(["nvidia.com/gpu", "spot"]),
            operator=st.sampled_from(["Equal", "Exists"]), value=st.sampled_from([None, "true"]),
            effect=st.sampled_from([None, "NoSchedule"]),
        ), max_size=2)),
    )


@st.composite
def retries(draw: st.DrawFn) -> il.Retry:
    contention = draw(st.one_of(
        st.none(), st.integers(0, 5),
        st.builds(
            il.Backoff, attempts=st.integers(0, 6), first=st.sampled_from(["30s", "5m", 60, 0.5]),
            factor=st.sampled_from([1, 1.5, 2.0, 3]), max_delay=st.sampled_from(["1h", "2h", 7200]),
            max_total=st.sampled_from([None, "6h", "1d"]),
        ),
    ))
    return il.Retry(
        transient=draw(st.integers(0, 3)), contention=contention, preempted=draw(st.integers(0, 20)),
        oom_remediation=draw(st.booleans()),
    )


@st.composite
def step_policies(draw: st.DrawFn) -> dict[str, Any]:
    labels = draw(st.dictionaries(st.sampled_from(["team", "cost-center"]), st.sampled_from(["fraud", "ml-42"]), max_size=2))
    return {
        "resources": draw(resources()),
        "retry": draw(retries()),
        "cache": draw(st.one_of(st.none(), st.builds(
            il.Cache, version=st.one_of(st.none(), st.text(max_size=8)), enabled=st.booleans(),
            ignore_inputs=st.lists(st.sampled_from(["i0", "i1"]), max_size=2, unique=True).map(tuple),
        ))),
        "checkpoint": draw(st.one_of(st.none(), st.builds(
            il.CheckpointPolicy, every=st.sampled_from(["30m", "1h", 600.0]), keep=st.integers(1, 5),
            store=st.sampled_from([None, "s3://bucket/ckpt"]),
        ))),
        "interruptible": draw(st.booleans()),
        "timeout_s": draw(st.one_of(st.none(), st.floats(1, 1e6))),
        "image": draw(st.sampled_from([None, "ghcr.io/team/train:1.2", "repo/img@sha256:" + "a" * 64])),
        "labels": tuple(sorted(labels.items())),
        "annotations": tuple(sorted(draw(st.dictionaries(st.sampled_from(["owner"]), st.text(max_size=10))).items())),
        "env": tuple(sorted(draw(st.dictionaries(st.sampled_from(["LOG_LEVEL", "SEED"]), st.text(max_size=5))).items())),
        "secrets": tuple(draw(st.lists(st.builds(
            il.Secret, group=st.sampled_from(["db-creds", "wandb"]), key=st.sampled_from(["password", "api-key"]),
            env=st.sampled_from([None, "DB_PASSWORD"]),
        ), max_size=2))),
        "distributed": draw(st.one_of(st.none(), st.builds(
            il.Torchrun, nnodes=st.integers(1, 4), nproc_per_node=st.integers(1, 8),
            backend=st.sampled_from(["nccl", "gloo"]),
        ))),
        "doc": draw(st.text(max_size=30)),
    }


@PROPS
@given(step_policies(), st.sampled_from(PORT_TYPES), st.sampled_from(PORT_TYPES))
def test_random_step_spec_round_trips_through_json(policies: dict[str, Any], tin: TypeSpec, tout: TypeSpec) -> None:
    step = StepSpec(
        name="train", ref="team.pipelines:train", inputs=(Port("data", tin), Port("seed", INT, True, 7)),
        outputs=(Port("o0", tout),), fingerprint="f" * 64, **policies,
    )
    assert StepSpec.from_json(json.loads(json.dumps(step.to_json()))) == step


NESTED_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=8,
)


@PROPS
@given(NESTED_JSON, NESTED_JSON)
def test_defaults_and_constants_round_trip_whatever_their_python_shape(default: Any, const: Any) -> None:
    # Regression: a tuple default (xs: list[int] = (1, 2)) came back from JSON as a list, so
    # the spec no longer equalled its round trip.
    port = Port("xs", TypeSpec("list"), True, default)
    binding = Binding.of_const(const)
    assert Port.from_json(json.loads(json.dumps(port.to_json()))) == port
    assert Binding.from_json(json.loads(json.dumps(binding.to_json()))) == binding


# Whole-spec examples draw their policies from a pool: drawing them per node is slow, and the
# per-step round trip above already covers the policy space.
POLICY_POOL = st.sampled_from([
    {},
    {"resources": il.Resources(cpu="2", memory="8Gi", gpu=2, accelerator="nvidia-h200", shared_memory="16Gi",
                               node_selector={"pool": "gpu"}, tolerations=[Toleration("nvidia.com/gpu", "Exists")]),
     "retry": il.Retry(transient=1, contention=il.Backoff(attempts=3, first="5m", factor=3, max_total=None)),
     "checkpoint": il.CheckpointPolicy(every="15m", keep=3), "interruptible": True,
     "labels": (("cost-center", "ml-42"), ("team", "fraud"))},
    {"cache": il.Cache(version="2", ignore_inputs=("i0",)), "timeout_s": 3600.0, "image": "ghcr.io/t/i:1",
     "doc": "d\u00e9j\u00e0 vu \"quoted\"\n"},
    {"secrets": (il.Secret("db-creds", "password"),), "env": (("SEED", "1"),), "retry": il.Retry(contention=None),
     "distributed": il.Torchrun(nnodes=2, nproc_per_node=4, min_nodes=1), "context_arg": "ctx"},
])


# -- random specs --------------------------------------------------------------------------------
@dataclasses.dataclass
class Drawn:
    spec: PipelineSpec
    edges: set[tuple[str, str]]  # (upstream, downstream): data, after and gate edges


def _widen(draw: st.DrawFn, t: TypeSpec) -> TypeSpec:
    """A port type that accepts ``t``: itself, float for int, or Optional of it."""
    options = [t]
    if t.kind == "int" and not t.optional:
        options.append(FLOAT)
    if not t.optional and t.kind != "none":
        options.append(dataclasses.replace(t, optional=True))
    return draw(st.sampled_from(options))


@st.composite
def random_specs(draw: st.DrawFn, policies: bool = True) -> Drawn:
    """A random valid spec; ``policies`` also draws each step's policies (slower to generate)."""
    n = draw(st.integers(1, 9))
    names = [f"node-{i}" for i in range(n)]
    params = [
        Port(f"p{k}", t, has_default, draw(CONSTS[t.kind]) if has_default else None)
        for k, (t, has_default) in enumerate(draw(st.lists(
            st.tuples(st.sampled_from([INT, FLOAT, STR, BOOL]), st.booleans()), max_size=3,
        )))
    ]
    outputs_of: list[list[Port]] = []
    steps: list[StepSpec] = []
    nodes: list[Node] = []
    edges: set[tuple[str, str]] = set()
    gates: list[Gate] = []
    gate_of: dict[str, str | None] = {}
    for i, name in enumerate(names):
        out_types = draw(st.lists(st.sampled_from(PORT_TYPES), min_size=0, max_size=3))
        outs = [Port(f"o{k}" if len(out_types) == 1 else f"out_{k}", t) for k, t in enumerate(out_types)]
        outputs_of.append(outs)
        in_ports: list[Port] = []
        bindings: list[tuple[str, Binding]] = []
        for j in draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=3, unique=True)) if i else []:
            if not outputs_of[j]:
                continue
            src = draw(st.sampled_from(outputs_of[j]))
            port_name = f"i{len(in_ports)}"
            if src.type.kind == "dataclass" and not src.type.optional and draw(st.booleans()):
                field, ftype = draw(st.sampled_from(list(src.type.fields)))
                in_ports.append(Port(port_name, _widen(draw, ftype)))
                bindings.append((port_name, Binding.of_output(names[j], src.name, (field,))))
            else:
                in_ports.append(Port(port_name, _widen(draw, src.type)))
                bindings.append((port_name, Binding.of_output(names[j], src.name)))
            edges.add((names[j], name))
        for p in draw(st.lists(st.sampled_from(params), max_size=2, unique_by=lambda p: p.name)) if params else []:
            port_name = f"i{len(in_ports)}"
            in_ports.append(Port(port_name, p.type))
            bindings.append((port_name, Binding.of_param(p.name)))
        for t in draw(st.lists(st.sampled_from([INT, FLOAT, STR, BOOL]), max_size=2)):
            port_name = f"i{len(in_ports)}"
            in_ports.append(Port(port_name, t))
            bindings.append((port_name, Binding.of_const(draw(CONSTS[t.kind]))))
        if draw(st.booleans()):  # an optional input left unbound, with a JSON default
            in_ports.append(Port(f"i{len(in_ports)}", TypeSpec("list"), True, draw(st.lists(JSON_SCALARS, max_size=3))))
        after = tuple(names[j] for j in draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=2, unique=True))) if i else ()
        edges.update((a, name) for a in after)

        gate = None
        conds = [(j, p) for j in range(i) for p in outputs_of[j] if p.type == BOOL]
        if conds and draw(st.booleans()):
            if gates and draw(st.booleans()):
                gate = draw(st.sampled_from(gates)).id
            else:
                j, p = draw(st.sampled_from(conds))
                parent = gate_of.get(names[j]) if draw(st.booleans()) else None
                g = Gate(f"gate-{len(gates) + 1}", Binding.of_output(names[j], p.name), parent)
                gates.append(g)
                gate = g.id
            chain = gate
            while chain:
                g = next(x for x in gates if x.id == chain)
                edges.add((g.condition.node or "", name))
                chain = g.parent
        gate_of[name] = gate

        steps.append(StepSpec(
            name=f"step_{i}", ref=f"team.pipelines:step_{i}", inputs=tuple(in_ports), outputs=tuple(outs),
            fingerprint=draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
            output_tuple="team.pipelines:Out" if len(outs) > 1 else None,
            **(draw(POLICY_POOL) if policies else {}),
        ))
        nodes.append(Node(name, f"step_{i}", tuple(bindings), gate, after))

    ungated = [(nm, p) for nm, outs in zip(names, outputs_of, strict=True) if gate_of[nm] is None for p in outs]
    chosen = draw(st.lists(st.sampled_from(ungated), max_size=3, unique=True)) if ungated else []
    spec = PipelineSpec(
        name=draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
        ref=draw(st.sampled_from([None, "team.pipelines:retrain"])),
        params=tuple(params),
        steps=tuple(draw(st.permutations(steps))),
        nodes=tuple(draw(st.permutations(nodes))),  # declaration order is not topological
        gates=tuple(gates),
        outputs=tuple((f"r{k}", Binding.of_output(nm, p.name)) for k, (nm, p) in enumerate(chosen)),
        output_types=tuple((f"r{k}", p.type) for k, (_, p) in enumerate(chosen)),
        labels=tuple(sorted(draw(st.dictionaries(st.sampled_from(["team"]), st.sampled_from(["ml"]))).items())),
        triggers=draw(st.sampled_from([(), (il.Cron("0 3 * * *"),)])),
        doc=draw(st.text(max_size=40)),
    )
    return Drawn(spec, edges)


def assert_respects(order: list[str], edges: set[tuple[str, str]]) -> None:
    pos = {name: i for i, name in enumerate(order)}
    for up, down in edges:
        assert pos[up] < pos[down], f"{up} must come before {down} in {order}"


@PROPS
@given(random_specs())
def test_random_spec_round_trips_through_json(drawn: Drawn) -> None:
    spec = drawn.spec
    text = spec.dumps()
    back = PipelineSpec.loads(text)
    assert back == spec
    assert back.dumps() == text
    # Through a plain JSON document too (what a container or another language would see).
    assert PipelineSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


@PROPS
@given(random_specs(policies=False))
def test_topological_order_respects_every_edge(drawn: Drawn) -> None:
    ordered = validate(drawn.spec)
    order = [n.name for n in ordered.nodes]
    assert sorted(order) == sorted(n.name for n in drawn.spec.nodes)
    assert_respects(order, drawn.edges)
    # Ordering is canonical: validating again, or after a round trip, changes nothing.
    assert validate(ordered) == ordered
    assert validate(PipelineSpec.loads(ordered.dumps())) == ordered


@PROPS
@given(random_specs(policies=False), st.data())
def test_a_back_edge_is_always_a_cycle(drawn: Drawn, data: st.DataObject) -> None:
    if not drawn.edges:
        return
    up, down = data.draw(st.sampled_from(sorted(drawn.edges)))
    nodes = tuple(
        dataclasses.replace(n, after=(*n.after, down)) if n.name == up else n for n in drawn.spec.nodes
    )
    with pytest.raises(il.PipelineDefinitionError, match="cycle between steps"):
        topological_order(nodes, pipeline=drawn.spec.name, gates=drawn.spec.gates)


# -- random @il.pipeline functions ------------------------------------------------------------------
OPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("neg"), st.integers(0, 50)),
    st.tuples(st.just("shift"), st.integers(0, 50), st.one_of(st.none(), st.integers(-5, 5))),
    st.tuples(st.just("gate"), st.integers(0, 50), st.integers(0, 50)),
)
PLANS = st.lists(OPS, max_size=8)


def make_pipeline(plan: list[tuple[Any, ...]], name: str = "random-wiring") -> il.Pipeline:
    """An @il.pipeline whose body follows ``plan``; operands index the values made so far."""

    def body(x: int = 3, y: int = -2):
        vals = [x, y]
        for op in plan:
            a = vals[op[1] % len(vals)]
            if op[0] == "add":
                vals.append(arith.add(a=a, b=vals[op[2] % len(vals)]))
            elif op[0] == "neg":
                vals.append(arith.neg(x=a))
            elif op[0] == "shift":
                vals.append(arith.shift(x=a) if op[2] is None else arith.shift(x=a, by=op[2]))
            else:
                with il.when(arith.is_positive(x=a)):
                    arith.show(x=vals[op[2] % len(vals)])
        return arith.neg(x=vals[-1])

    return il.pipeline(name=name)(body)


def evaluate(plan: list[tuple[Any, ...]], x: int, y: int) -> tuple[int, list[bool]]:
    """The plan evaluated in plain Python: the result and, per gate, whether its block runs."""
    vals = [x, y]
    gates = []
    for op in plan:
        a = vals[op[1] % len(vals)]
        if op[0] == "add":
            vals.append(a + vals[op[2] % len(vals)])
        elif op[0] == "neg":
            vals.append(-a)
        elif op[0] == "shift":
            vals.append(a + (1 if op[2] is None else op[2]))
        else:
            gates.append(a > 0)
    return -vals[-1], gates


def spec_edges(spec: PipelineSpec) -> set[tuple[str, str]]:
    edges = set()
    for n in spec.nodes:
        edges.update((up, n.name) for up in n.upstream())
        edges.update((g.condition.node or "", n.name) for g in spec.gate_chain(n.gate))
    return edges


@PROPS
@given(PLANS)
def test_random_pipeline_function_round_trips_and_is_ordered(plan: list[tuple[Any, ...]]) -> None:
    spec = il.spec(make_pipeline(plan))
    assert PipelineSpec.loads(spec.dumps()) == spec
    assert len(spec.nodes) == 1 + sum(2 if op[0] == "gate" else 1 for op in plan)
    assert len(spec.gates) == sum(op[0] == "gate" for op in plan)
    assert_respects([n.name for n in spec.nodes], spec_edges(spec))


@settings(PROPS, max_examples=12)
@given(plan=PLANS, x=st.integers(-3, 3), y=st.integers(-3, 3))
def test_random_pipeline_runs_locally_like_plain_python(
    plan: list[tuple[Any, ...]], x: int, y: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pipe = make_pipeline(plan)
    workdir = tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())
    result = il.run(pipe, backend="local", workdir=workdir, x=x, y=y)
    expected, gates_open = evaluate(plan, x, y)
    assert result.outputs == {"o0": expected}
    shows = [n.name for n in il.spec(pipe).nodes if n.step == "show"]
    by_gate = {il.spec(pipe).node(s).gate: s for s in shows}
    for k, is_open in enumerate(gates_open):
        node = by_gate[f"gate-{k + 1}"]
        assert result.steps[node].status == ("succeeded" if is_open else "skipped")
