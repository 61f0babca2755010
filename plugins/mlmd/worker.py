"""ML Metadata worker: runs INSIDE the ml-metadata virtualenv, never in interlock's own.

ml-metadata 1.17 pins protobuf<5 while kfp 2.17 needs protobuf>=6, so the official library
lives in its own interpreter and this script is the only code that touches it. It imports
the standard library and ``ml_metadata`` only (no interlock, no kfp) and is started by file
path: ``python -I worker.py --sqlite PATH`` or ``python -I worker.py --host H --port P``.

Protocol: JSON lines. After connecting, the worker writes one line
``{"ready": true, "mlmd": VERSION}`` (or ``{"ready": false, "error": {...}}`` and exits).
Then, per request line ``{"id": N, "cmd": NAME, "args": {...}}`` it writes one response line
``{"id": N, "ok": true, "result": ...}`` or ``{"id": N, "ok": false, "error": {"kind", "message"}}``.
Commands: ping, record_run, upstream, runs, shutdown.

Types and names follow KFP v2's own MLMD layout: contexts ``system.Pipeline`` and
``system.PipelineRun`` (the run's parent is the pipeline), executions
``system.ContainerExecution``, artifacts ``system.Dataset``/``system.Model``/
``system.Metrics``/``system.Artifact``; the step and port names are the ``display_name``
custom property, as KFP writes them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import traceback
from typing import Any

PIPELINE_TYPE = "system.Pipeline"
RUN_TYPE = "system.PipelineRun"
EXECUTION_TYPE = "system.ContainerExecution"
DEFAULT_ARTIFACT_TYPE = "system.Artifact"

# Custom properties that hold JSON text (MLMD values are scalars; lists and dicts are
# stored as JSON strings so that ints stay ints, unlike protobuf Struct).
JSON_PROPERTIES = ("snapshot_ids", "parameters")

_STATES = {
    "COMPLETE": "COMPLETE",
    "SUCCEEDED": "COMPLETE",
    "SUCCESS": "COMPLETE",
    "CACHED": "CACHED",
    "FAILED": "FAILED",
    "RUNNING": "RUNNING",
    "NEW": "NEW",
    "PENDING": "NEW",
    "CANCELED": "CANCELED",
    "CANCELLED": "CANCELED",
    "SKIPPED": "CANCELED",
}


class RequestError(Exception):
    """A bad request or a missing object; ``kind`` travels back to the client."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --------------------------------------------------------------------------- values


def _set_props(target: Any, props: dict[str, Any]) -> None:
    for key, value in props.items():
        if value is None:
            continue
        slot = target[str(key)]
        if isinstance(value, bool):
            slot.bool_value = value
        elif isinstance(value, int):
            slot.int_value = value
        elif isinstance(value, float):
            slot.double_value = value
        elif isinstance(value, str):
            slot.string_value = value
        else:
            slot.string_value = json.dumps(value, sort_keys=True, default=str)


def _get_props(source: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in source.items():
        which = value.WhichOneof("value")
        if which is None:
            continue
        if which == "struct_value":
            from google.protobuf import json_format

            out[key] = json_format.MessageToDict(value.struct_value)
        elif which == "proto_value":
            out[key] = f"<proto {value.proto_value.type_url}>"
        else:
            out[key] = getattr(value, which)
        if key in JSON_PROPERTIES and isinstance(out[key], str):
            try:
                out[key] = json.loads(out[key])
            except ValueError:
                pass
    return out


# --------------------------------------------------------------------------- store


class Worker:
    def __init__(self, store: Any, pb: Any, errors: Any) -> None:
        self.store = store
        self.pb = pb
        self.errors = errors
        self._type_ids: dict[tuple[str, str], int] = {}
        self._type_names: dict[int, str] = {}

    # -- types ---------------------------------------------------------------

    def _type_id(self, kind: str, name: str) -> int:
        key = (kind, name)
        if key in self._type_ids:
            return self._type_ids[key]
        getter = getattr(self.store, f"get_{kind}_type")
        try:
            type_id = getter(name).id
        except self.errors.NotFoundError:
            # No declared properties: everything is a custom property, like KFP's own types,
            # so an existing cluster store with richer types is reused as it is.
            proto = {
                "artifact": self.pb.ArtifactType,
                "execution": self.pb.ExecutionType,
                "context": self.pb.ContextType,
            }[kind](name=name)
            putter = getattr(self.store, f"put_{kind}_type")
            type_id = putter(proto, can_add_fields=True, can_omit_fields=True)
        self._type_ids[key] = type_id
        self._type_names[type_id] = name
        return type_id

    def _type_name(self, kind: str, type_id: int) -> str:
        if type_id not in self._type_names:
            getter = getattr(self.store, f"get_{kind}_types_by_id")
            for t in getter([type_id]):
                self._type_names[t.id] = t.name
        return self._type_names.get(type_id, "?")

    def _context(self, type_name: str, name: str, props: dict[str, Any]) -> tuple[Any, bool]:
        type_id = self._type_id("context", type_name)
        ctx = self.store.get_context_by_type_and_name(type_name, name)
        created = ctx is None
        if created:
            ctx = self.pb.Context(type_id=type_id, name=name)
        _set_props(ctx.custom_properties, props)
        try:
            [ctx_id] = self.store.put_contexts([ctx])
        except self.errors.StatusError:
            # Another writer created it between our read and write: update theirs.
            raced = self.store.get_context_by_type_and_name(type_name, name)
            if not created or raced is None:
                raise
            ctx, created = raced, False
            _set_props(ctx.custom_properties, props)
            [ctx_id] = self.store.put_contexts([ctx])
        ctx.id = ctx_id
        return ctx, created

    # -- record --------------------------------------------------------------

    def record_run(self, run: dict[str, Any]) -> dict[str, Any]:
        pb = self.pb
        pipeline = _require_str(run, "pipeline")
        run_id = _require_str(run, "run_id")
        steps = run.get("steps") or []
        if not isinstance(steps, list):
            raise RequestError("invalid", "'steps' must be a list")

        exec_type = self._type_id("execution", EXECUTION_TYPE)
        # Recording the same receipt twice must not duplicate executions or events.
        known_run = self.store.get_context_by_type_and_name(RUN_TYPE, run_id)
        existing = {
            e.name: e.id
            for e in (self.store.get_executions_by_context(known_run.id) if known_run else [])
            if e.type_id == exec_type
        }
        artifacts: list[Any] = []  # one per URI, index-aligned with art_index
        art_index: dict[str, int] = {}
        executions: list[Any] = []
        edges: list[tuple[int, int, Any]] = []
        recorded: list[str] = []
        skipped: list[str] = []
        skipped_ids: dict[str, int] = {}

        for step in steps:
            step_name = _require_str(step, "name")
            exe_name = f"{run_id}/{step_name}"
            if step_name in recorded or step_name in skipped:
                raise RequestError("invalid", f"step {step_name!r} appears twice in run {run_id!r}")
            if exe_name in existing:
                skipped.append(step_name)
                skipped_ids[step_name] = existing[exe_name]
                continue

            ports: list[tuple[dict[str, Any], int]] = []
            for port in step.get("inputs") or []:
                ports.append((port, pb.Event.INPUT))
            for port in step.get("outputs") or []:
                ports.append((port, pb.Event.OUTPUT))
            for port, kind in ports:
                self._artifact_slot(port, artifacts, art_index)
                if kind == pb.Event.OUTPUT and port.get("properties"):
                    art = artifacts[art_index[port["uri"]]]
                    _set_props(art.custom_properties, port["properties"])

            state = _state(step)
            cached_from = None
            if state == "CACHED":
                cached_from = self._original_producer(
                    [
                        artifacts[art_index[p["uri"]]].id
                        for p, kind in ports
                        if kind == pb.Event.OUTPUT and artifacts[art_index[p["uri"]]].HasField("id")
                    ]
                )

            props = {
                "display_name": step_name,
                "task_name": step_name,
                "pipeline_name": pipeline,
                "run_id": run_id,
                "backend": run.get("backend"),
                "image": step.get("image"),
                "image_digest": step.get("image_digest"),
                "git_sha": step.get("git_sha", run.get("git_sha")),
                "git_dirty": step.get("git_dirty", run.get("git_dirty")),
                "snapshot_ids": list(step.get("snapshots") or []),
                "cached": bool(step.get("cached")) or state == "CACHED",
                "started_at": _float_or_none(step.get("started")),
                "ended_at": _float_or_none(step.get("ended")),
                "attempts": step.get("attempts"),
                "failure_kind": step.get("failure_kind"),
            }
            if cached_from is not None:
                props["cached_execution_id"] = cached_from[0]
                props["cached_from_run"] = cached_from[1]
            exe = pb.Execution(
                type_id=exec_type,
                name=exe_name,
                last_known_state=getattr(pb.Execution, state),
            )
            _set_props(exe.custom_properties, props)
            executions.append(exe)
            recorded.append(step_name)
            for port, kind in ports:
                event = pb.Event(type=kind)
                event.path.steps.add().key = str(port.get("name") or "")
                edges.append((len(executions) - 1, art_index[port["uri"]], event))

        # Everything is validated; now write. Contexts first (the run's parent is the
        # pipeline, as in KFP), then the steps.
        run_props = {
            "pipeline_name": pipeline,
            "run_id": run_id,
            "backend": run.get("backend"),
            "git_sha": run.get("git_sha"),
            "git_dirty": run.get("git_dirty"),
            "parameters": run.get("parameters"),
        }
        pipe_ctx, _ = self._context(PIPELINE_TYPE, pipeline, {"pipeline_name": pipeline})
        run_ctx, run_created = self._context(RUN_TYPE, run_id, run_props)
        if run_created:
            self.store.put_parent_contexts(
                [pb.ParentContext(child_id=run_ctx.id, parent_id=pipe_ctx.id)]
            )

        execution_ids = dict(skipped_ids)
        artifact_ids: dict[str, int] = {}
        if executions:
            # One transaction for the whole run: all or nothing, and one fsync, not one per
            # step. Every execution is associated, and every artifact attributed, to both
            # the pipeline and the run context.
            exe_ids, art_ids, _ = self.store.put_lineage_subgraph(
                executions,
                artifacts,
                [pipe_ctx, run_ctx],
                edges,
                reuse_context_if_already_exist=True,
                reuse_artifact_if_already_exist_by_external_id=True,
            )
            execution_ids.update(zip(recorded, exe_ids, strict=True))
            artifact_ids = {a.uri: i for a, i in zip(artifacts, art_ids, strict=True)}

        return {
            "run_id": run_id,
            "pipeline": pipeline,
            "run_context_id": run_ctx.id,
            "pipeline_context_id": pipe_ctx.id,
            "execution_ids": {s: execution_ids[s] for s in recorded + skipped},
            "artifact_ids": artifact_ids,
            "recorded": recorded,
            "skipped": skipped,
        }

    def _artifact_slot(
        self, port: dict[str, Any], artifacts: list[Any], index: dict[str, int]
    ) -> None:
        """Artifacts are de-duplicated by URI, across runs: an output consumed downstream (or
        reused by a cache hit) is one artifact with several events."""
        uri = _require_str(port, "uri")
        if uri in index:
            return
        found = sorted(self.store.get_artifacts_by_uri(uri), key=lambda a: a.id)
        if found:
            art = found[0]
        else:
            art = self.pb.Artifact(
                type_id=self._type_id("artifact", port.get("type") or DEFAULT_ARTIFACT_TYPE),
                uri=uri,
                state=self.pb.Artifact.LIVE,
                # A URI-derived external id makes two writers racing on a new URI share
                # one artifact (MLMD reuses it) instead of creating two.
                external_id="uri-sha256:" + hashlib.sha256(uri.encode()).hexdigest(),
            )
            _set_props(art.custom_properties, {"display_name": port.get("name")})
        index[uri] = len(artifacts)
        artifacts.append(art)

    def _original_producer(self, artifact_ids: list[int]) -> tuple[int, str] | None:
        """The first non-cached execution that output one of these artifacts."""
        if not artifact_ids:
            return None
        producers = sorted(
            {
                e.execution_id
                for e in self.store.get_events_by_artifact_ids(artifact_ids)
                if e.type == self.pb.Event.OUTPUT
            }
        )
        if not producers:
            return None
        for exe in sorted(self.store.get_executions_by_id(producers), key=lambda x: x.id):
            if exe.last_known_state != self.pb.Execution.CACHED:
                run_id = _get_props(exe.custom_properties).get("run_id", "")
                return exe.id, str(run_id)
        return None

    # -- query ---------------------------------------------------------------

    def _artifact_json(self, art: Any) -> dict[str, Any]:
        props = _get_props(art.custom_properties)
        runs = [
            c.name
            for c in sorted(self.store.get_contexts_by_artifact(art.id), key=lambda c: c.id)
            if c.type_id == self._type_id("context", RUN_TYPE)
        ]
        return {
            "id": art.id,
            "uri": art.uri,
            "type": self._type_name("artifact", art.type_id),
            "name": props.pop("display_name", "") or art.name,
            "properties": props,
            "runs": runs,
            "created_ms": art.create_time_since_epoch,
        }

    def _execution_json(self, exe: Any) -> dict[str, Any]:
        props = _get_props(exe.custom_properties)
        return {
            "id": exe.id,
            "type": self._type_name("execution", exe.type_id),
            "step": props.get("display_name") or props.get("task_name") or exe.name,
            "state": self.pb.Execution.State.Name(exe.last_known_state),
            "properties": props,
            "created_ms": exe.create_time_since_epoch,
        }

    def upstream(self, args: dict[str, Any]) -> dict[str, Any]:
        max_depth = int(args.get("max_depth") or 100)
        run_info = None
        starts: list[tuple[int, str | None]]
        seed: list[dict[str, Any]]
        if args.get("run_id"):
            run_id = str(args["run_id"])
            ctx = self.store.get_context_by_type_and_name(RUN_TYPE, run_id)
            if ctx is None:
                raise RequestError("not_found", f"no pipeline run {run_id!r} in the store")
            run_info = self._run_json(ctx)
            run_execs = sorted(self.store.get_executions_by_context(ctx.id), key=lambda e: e.id)
            run_info["steps"] = [self._execution_json(e)["step"] for e in run_execs]
            events = self.store.get_events_by_execution_ids([e.id for e in run_execs])
            inputs = {e.artifact_id for e in events if e.type == self.pb.Event.INPUT}
            outputs = []
            for e in sorted(events, key=lambda e: (e.execution_id, e.artifact_id)):
                if e.type == self.pb.Event.OUTPUT and e.artifact_id not in inputs:
                    if e.artifact_id not in outputs:
                        outputs.append(e.artifact_id)
            starts = [(a, run_id) for a in outputs]
            # Steps that output nothing (failed, still running) are roots too, or a run
            # query would hide exactly the step one is looking for.
            producing = {e.execution_id for e in events if e.type == self.pb.Event.OUTPUT}
            seed = [self._execution_json(e) for e in run_execs if e.id not in producing]
            target = run_id
        else:
            uri = _require_str(args, "uri")
            uris = [uri]
            if uri.startswith("/"):
                uris.append("file://" + uri)
            found: list[Any] = []
            for candidate in uris:
                found = sorted(self.store.get_artifacts_by_uri(candidate), key=lambda a: a.id)
                if found:
                    break
            if not found:
                raise RequestError("not_found", f"no artifact with uri {uri!r} in the store")
            starts = [(found[0].id, None)]
            seed = []
            target = uri

        artifacts: dict[int, dict[str, Any]] = {}
        executions: dict[int, dict[str, Any]] = {}
        for exe in seed:
            exe["inputs"] = []
            executions[exe["id"]] = exe
        seed_runs = [(e["id"], e["properties"].get("run_id")) for e in seed]
        frontier = starts + self._input_frontier(seed_runs, executions)
        depth = 0
        while frontier and depth < max_depth:
            depth += 1
            ids = list(dict.fromkeys(a for a, _ in frontier if a not in artifacts))
            prefer = dict(reversed(frontier))  # first path to reach an artifact wins
            if not ids:
                break
            for art in self.store.get_artifacts_by_id(ids):
                artifacts[art.id] = self._artifact_json(art)
                artifacts[art.id]["producer"] = None
            producers: dict[int, list[int]] = {}
            for ev in self.store.get_events_by_artifact_ids(ids):
                if ev.type == self.pb.Event.OUTPUT:
                    producers.setdefault(ev.artifact_id, []).append(ev.execution_id)
            needed = sorted({x for xs in producers.values() for x in xs} - set(executions))
            fetched = {
                e.id: self._execution_json(e) for e in self.store.get_executions_by_id(needed)
            }
            fetched.update(executions)
            chosen: list[tuple[int, str | None]] = []
            for art_id in ids:
                candidates = [fetched[x] for x in sorted(producers.get(art_id, [])) if x in fetched]
                pick = _pick_producer(candidates, prefer.get(art_id))
                if pick is None:
                    continue
                artifacts[art_id]["producer"] = pick["id"]
                if pick["id"] not in executions:
                    pick["inputs"] = []
                    executions[pick["id"]] = pick
                    chosen.append((pick["id"], pick["properties"].get("run_id")))
            frontier = self._input_frontier(chosen, executions)
        return {
            "target": target,
            "kind": "run" if run_info else "artifact",
            "run": run_info,
            "roots": [a for a, _ in starts],
            "root_executions": [e["id"] for e in seed],
            "artifacts": {str(k): v for k, v in artifacts.items()},
            "executions": {str(k): v for k, v in executions.items()},
            "truncated": bool(frontier),
        }

    def _input_frontier(
        self, chosen: list[tuple[int, str | None]], executions: dict[int, dict[str, Any]]
    ) -> list[tuple[int, str | None]]:
        """Record the INPUT edges of these executions; their artifacts are walked next."""
        if not chosen:
            return []
        run_of = dict(chosen)
        frontier = []
        events = self.store.get_events_by_execution_ids(list(run_of))
        for ev in sorted(events, key=lambda e: (e.execution_id, e.artifact_id)):
            if ev.type != self.pb.Event.INPUT:
                continue
            port = ev.path.steps[0].key if ev.path.steps else ""
            executions[ev.execution_id]["inputs"].append({"artifact": ev.artifact_id, "port": port})
            frontier.append((ev.artifact_id, run_of[ev.execution_id]))
        return frontier

    def _run_json(self, ctx: Any) -> dict[str, Any]:
        props = _get_props(ctx.custom_properties)
        return {
            "run_id": ctx.name,
            "pipeline": props.get("pipeline_name"),
            "backend": props.get("backend"),
            "git_sha": props.get("git_sha"),
            "git_dirty": props.get("git_dirty"),
            "parameters": props.get("parameters") or {},
            "created_ms": ctx.create_time_since_epoch,
        }

    def runs(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        pipeline = args.get("pipeline")
        if pipeline:
            pipe_ctx = self.store.get_context_by_type_and_name(PIPELINE_TYPE, pipeline)
            if pipe_ctx is None:
                return []
            contexts = [
                c
                for c in self.store.get_children_contexts_by_context(pipe_ctx.id)
                if c.type_id == self._type_id("context", RUN_TYPE)
            ]
        else:
            contexts = self.store.get_contexts_by_type(RUN_TYPE)
        out = []
        for ctx in sorted(contexts, key=lambda c: c.id):
            info = self._run_json(ctx)
            executions = sorted(self.store.get_executions_by_context(ctx.id), key=lambda e: e.id)
            info["steps"] = [self._execution_json(e)["step"] for e in executions]
            info["cached_steps"] = sum(
                1 for e in executions if e.last_known_state == self.pb.Execution.CACHED
            )
            out.append(info)
        return out


def _pick_producer(candidates: list[dict[str, Any]], run_id: str | None) -> dict[str, Any] | None:
    """The execution that explains an artifact: the one in the run being followed (a cache
    hit there says where it came from), else the original, non-cached producer."""
    if not candidates:
        return None
    if run_id is not None:
        for c in candidates:
            if c["properties"].get("run_id") == run_id:
                return c
    for c in candidates:
        if c["state"] != "CACHED":
            return c
    return candidates[0]


def _state(step: dict[str, Any]) -> str:
    if step.get("cached"):
        return "CACHED"
    raw = str(step.get("state") or "COMPLETE").upper()
    if raw not in _STATES:
        raise RequestError("invalid", f"step {step.get('name')!r}: unknown state {raw!r}")
    return _STATES[raw]


def _require_str(obj: Any, key: str) -> str:
    if not isinstance(obj, dict) or not isinstance(obj.get(key), str) or not obj[key]:
        raise RequestError("invalid", f"missing or empty string field {key!r} in {obj!r:.200}")
    return obj[key]


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


# --------------------------------------------------------------------------- main


def _error_kind(exc: BaseException, errors: Any) -> str:
    if isinstance(exc, RequestError):
        return exc.kind
    if errors is not None:
        if isinstance(exc, errors.UnavailableError | errors.DeadlineExceededError):
            return "connection"
        if isinstance(exc, errors.NotFoundError):
            return "not_found"
        if isinstance(exc, errors.AlreadyExistsError):
            return "conflict"
        if isinstance(exc, errors.InvalidArgumentError | errors.FailedPreconditionError):
            return "invalid"
    return "internal"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlite")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--timeout", type=float, default=None)
    opts = parser.parse_args(argv)

    # The protocol owns the real stdout; anything else that prints (absl, C++ logging)
    # goes to stderr so it can never corrupt a response line.
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def send(obj: dict[str, Any]) -> None:
        proto_out.write(json.dumps(obj, default=str) + "\n")
        proto_out.flush()

    errors = None
    try:
        import ml_metadata
        from ml_metadata import errors as mlmd_errors
        from ml_metadata import metadata_store
        from ml_metadata.proto import metadata_store_pb2 as pb

        errors = mlmd_errors
    except ImportError as exc:
        send({"ready": False, "error": {"kind": "unavailable", "message": f"{exc}"}})
        return 3

    try:
        if opts.sqlite:
            config: Any = pb.ConnectionConfig()
            config.sqlite.filename_uri = opts.sqlite
            config.sqlite.connection_mode = pb.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        elif opts.host and opts.port:
            config = pb.MetadataStoreClientConfig(host=opts.host, port=opts.port)
            if opts.timeout:
                config.client_timeout_sec = opts.timeout
        else:
            raise RequestError("invalid", "give --sqlite PATH or --host HOST --port PORT")
        store = metadata_store.MetadataStore(config)
        # A gRPC store connects lazily; ask once so a wrong address fails now, clearly.
        store.get_context_types()
    except Exception as exc:  # noqa: BLE001 - reported to the client, which raises
        send({"ready": False, "error": {"kind": _error_kind(exc, errors), "message": str(exc)}})
        return 4

    worker = Worker(store, pb, errors)
    handlers = {
        "ping": lambda args: {"mlmd": ml_metadata.__version__},
        "record_run": worker.record_run,
        "upstream": worker.upstream,
        "runs": worker.runs,
    }
    send({"ready": True, "mlmd": ml_metadata.__version__, "pid": os.getpid()})

    for line in sys.stdin:
        if not line.strip():
            continue
        req_id = None
        try:
            request = json.loads(line)
            req_id = request.get("id")
            cmd = request.get("cmd")
            if cmd == "shutdown":
                send({"id": req_id, "ok": True, "result": None})
                return 0
            if cmd not in handlers:
                raise RequestError("invalid", f"unknown command {cmd!r}")
            result = handlers[cmd](request.get("args") or {})
            send({"id": req_id, "ok": True, "result": result})
        except Exception as exc:  # noqa: BLE001 - every failure becomes a response
            send(
                {
                    "id": req_id,
                    "ok": False,
                    "error": {
                        "kind": _error_kind(exc, errors),
                        "type": type(exc).__name__,
                        "message": str(exc),
                        "traceback": traceback.format_exc(limit=5)
                        if not isinstance(exc, RequestError)
                        else None,
                    },
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
