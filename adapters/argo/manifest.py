"""The Workflow (or WorkflowTemplate, or CronWorkflow) around the rendered templates, loaded
through hera's models and written as YAML; a key hera's models do not know fails the compile.

hera's ``model_validate`` drops unknown keys silently, so the check is a round trip: the
document, through the models and back, must be the same document; the first difference is
named with its path (``spec.templates[3].retryStrategy.backof``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlock.core.backend.plan import lower
from interlock.core.base.errors import PipelineDefinitionError
from interlock.core.model.pipeline_spec import PipelineSpec

from .names import dns
from .options import DEFAULT_IMAGE, ArgoOptions
from .policies import STATE_VOLUME, contract_env
from .render import ENTRY, OUT_DIR, Renderer
from .schedules import cron_workflows
from .values import default_text

API_VERSION = "argoproj.io/v1alpha1"
EXIT_TEMPLATE = "interlock-exit"


def build(spec: PipelineSpec, opts: ArgoOptions) -> list[dict[str, Any]]:
    """The manifests as plain data (what ``kubectl apply`` or ``argo submit`` reads): the
    Workflow, WorkflowTemplate or, with one time trigger, its CronWorkflow; with several, the
    WorkflowTemplate and one CronWorkflow per trigger (``schedules.py``)."""
    if not spec.ref or spec.ref.startswith("__main__:"):
        raise PipelineDefinitionError(
            f"pipeline reference {spec.ref!r} cannot be imported inside a container", pipeline=spec.name,
            hint="define the pipeline in an importable module (not a script run as __main__)",
        )
    r = Renderer(lower(spec), opts)
    root = r.main()
    body: dict[str, Any] = {"entrypoint": root.name, "templates": r.templates}
    params = [{"name": p.name, **({"value": default_text(p.default, p.type)} if p.has_default else {})}
              for p in spec.params]
    if params:
        body["arguments"] = {"parameters": params}
    exit_t = exit_template(spec, r, opts)
    if exit_t is not None:
        r.templates.append(exit_t)
        body["onExit"] = exit_t["name"]
    if opts.state_pvc:
        body["volumes"] = [{"name": STATE_VOLUME, "persistentVolumeClaim": {"claimName": opts.state_pvc}}]
    if opts.service_account:
        body["serviceAccountName"] = opts.service_account
    if opts.artifact_repository:
        cm, _, key = opts.artifact_repository.partition("/")
        body["artifactRepositoryRef"] = {"configMap": cm, "key": key}
    if spec.labels:
        body["podMetadata"] = {"labels": dict(spec.labels)}
    meta: dict[str, Any] = {"labels": {"interlock.dev/pipeline": dns(spec.name)}}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    crons = cron_workflows(spec, body, meta)
    template = {"apiVersion": API_VERSION, "kind": "WorkflowTemplate", "metadata": {**meta, "name": dns(spec.name)},
                "spec": body}
    if len(crons) > 1:
        return [template, *crons]
    if crons:
        return crons
    if opts.kind == "template":
        return [template]
    return [{"apiVersion": API_VERSION, "kind": "Workflow",
             "metadata": {**meta, "generateName": f"{dns(spec.name, 56)}-"}, "spec": body}]


def exit_template(spec: PipelineSpec, r: Renderer, opts: ArgoOptions) -> dict[str, Any] | None:
    """``onExit``: the whole pipeline's finally step (it sees ``{{workflow.status}}`` and the run
    state's fragments) and, with shared run state, the receipt, as KFP's exit handler."""
    durable = bool(opts.state_pvc or opts.state_store)
    node = spec.finally_
    if node is None and not durable:
        return None
    mode = "exit" if durable else "finally"
    extra = ["--status", "{{workflow.status}}"]
    if durable:
        for p in spec.params:
            extra += ["--param", p.name, f"{{{{workflow.parameters.{p.name}}}}}"]
    if node is not None:
        for _, b in node.inputs:
            if b.nodes() and not durable:  # with shared state it reads them from there (render.py)
                raise PipelineDefinitionError(
                    f"reads {sorted(b.nodes())[0]!r}: Argo's onExit handler sees the workflow's parameters, "
                    "not its tasks' outputs; it reads them from the run state, which needs a shared store",
                    pipeline=spec.name, step=node.name,
                    hint="compile with state_pvc=CLAIM or state_store=s3://BUCKET/PREFIX")
        hook: dict[str, Any] = {}
        t = r.container(node, hook, r.dag_of.get(node.name) or _root(r), set(), mode=mode, extra_args=extra)
        t["name"] = EXIT_TEMPLATE
        for a in hook.get("arguments", {}).get("parameters", []):  # params feed it directly
            for i in t.get("inputs", {}).get("parameters", []):
                if i["name"] == a["name"]:
                    i["value"] = a["value"]
        r.templates.remove(t)
        return t
    env = contract_env(spec.name, opts)
    t = {"name": EXIT_TEMPLATE, "container": {
        "image": opts.image or DEFAULT_IMAGE, "command": list(ENTRY),
        "args": ["exit", "--pipeline", spec.ref or "", "--out", OUT_DIR, *extra], "env": env}}
    if opts.state_pvc:
        from .policies import STATE_MOUNT

        t["container"]["volumeMounts"] = [{"name": STATE_VOLUME, "mountPath": STATE_MOUNT}]
    return t


def _root(r: Renderer) -> Any:
    from .refs import Dag

    return Dag("exit", {})


# -- hera --------------------------------------------------------------------------------
def _model(kind: str) -> Any:
    from hera.workflows import models as m

    return {"Workflow": m.Workflow, "WorkflowTemplate": m.WorkflowTemplate, "CronWorkflow": m.CronWorkflow}[kind]


def validate(doc: dict[str, Any]) -> Any:
    """Load ``doc`` through hera's models; refuse any field they drop or change."""
    import pydantic

    try:
        model = _model(doc["kind"]).model_validate(doc)
    except pydantic.ValidationError as exc:
        raise PipelineDefinitionError(f"the Argo manifest does not fit Argo's schema: {exc}") from exc
    again = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    where = first_difference(doc, again, "")
    if where is not None:
        raise PipelineDefinitionError(
            f"the Argo manifest has a field Argo's schema does not know, or of the wrong form: {where}",
            hint="a misspelt key in the renderer (hera's models drop unknown keys)",
        )
    return model


def first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                return f"{path}.{k}".lstrip(".")
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d is not None:
                return d
        extra = [k for k in b if k not in a]
        return f"{path}.{extra[0]} (added)".lstrip(".") if extra else None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} != {len(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if a != b and str(a) != str(b):
        return f"{path} ({a!r} != {b!r})"
    return None


def write(spec: PipelineSpec, out: Path, opts: ArgoOptions) -> list[Path]:
    """One YAML file per manifest: ``<pipeline>.yaml`` (or ``out`` when it names a .yaml file)
    first, then each further CronWorkflow as ``<its name>.yaml`` beside it."""
    import yaml

    docs = build(spec, opts)
    for doc in docs:
        validate(doc)
    path = out / f"{dns(spec.name)}.yaml" if out.suffix not in (".yaml", ".yml") else out
    path.parent.mkdir(parents=True, exist_ok=True)
    paths = [path, *(path.with_name(f"{d['metadata']['name']}.yaml") for d in docs[1:])]
    _remove_stale_crons(path.parent, dns(spec.name), set(paths))
    for p, doc in zip(paths, docs, strict=True):
        p.write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    return paths


def _remove_stale_crons(folder: Path, pipeline: str, keep: set[Path]) -> None:
    """A CronWorkflow of this pipeline from an earlier compile whose trigger is gone: `kubectl
    apply -f` of the folder must not schedule it again."""
    import yaml

    for old in folder.glob(f"{pipeline}-*.yaml"):
        if old in keep:
            continue
        try:
            doc = yaml.safe_load(old.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "CronWorkflow" and \
                doc.get("metadata", {}).get("labels", {}).get("interlock.dev/pipeline") == pipeline:
            old.unlink()
