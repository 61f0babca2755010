"""An in-process FlyteAdmin: the AdminService calls the bridge uses, with real gRPC status codes.

A real ``FlyteRemote`` talks to it over loopback. Each launch plan carries a list of
scripted runs; every CreateExecution takes the next one (the last repeats). A run is a
phase sequence: each GetExecution returns the next phase and then stays on the last,
so ``[RUNNING]`` runs until someone terminates it. The validation is written here
independently of the code under test (execution-name and Kubernetes label rules), so a
bug in the bridge's sanitizing shows up as INVALID_ARGUMENT, as it would on a cluster.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import re
import threading
import urllib.parse
from collections import Counter
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from flyteidl.admin import execution_pb2, launch_plan_pb2, project_pb2
from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import identifier_pb2, interface_pb2, literals_pb2, types_pb2
from flyteidl.service import admin_pb2_grpc, auth_pb2, auth_pb2_grpc
from google.protobuf import timestamp_pb2

P = core_execution_pb2.WorkflowExecution.Phase
TERMINAL = {P.SUCCEEDED, P.FAILED, P.ABORTED, P.TIMED_OUT}
SIMPLE = types_pb2.SimpleType

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


def k8s_value_ok(value: str) -> bool:
    return bool(_LABEL_VALUE.fullmatch(value))


def lit(value: Any) -> literals_pb2.Literal:
    """A literal for a plain Python value; ``("blob", uri)`` makes a multipart blob."""
    if isinstance(value, tuple) and value[0] == "blob":
        blob_type = types_pb2.BlobType(dimensionality=types_pb2.BlobType.MULTIPART)
        return literals_pb2.Literal(
            scalar=literals_pb2.Scalar(
                blob=literals_pb2.Blob(
                    uri=value[1], metadata=literals_pb2.BlobMetadata(type=blob_type)
                )
            )
        )
    if isinstance(value, bool):
        prim = literals_pb2.Primitive(boolean=value)
    elif isinstance(value, int):
        prim = literals_pb2.Primitive(integer=value)
    elif isinstance(value, float):
        prim = literals_pb2.Primitive(float_value=value)
    elif isinstance(value, str):
        prim = literals_pb2.Primitive(string_value=value)
    elif isinstance(value, list):
        return literals_pb2.Literal(
            collection=literals_pb2.LiteralCollection(literals=[lit(v) for v in value])
        )
    elif isinstance(value, dict):
        return literals_pb2.Literal(
            map=literals_pb2.LiteralMap(literals={k: lit(v) for k, v in value.items()})
        )
    else:
        raise TypeError(value)
    return literals_pb2.Literal(scalar=literals_pb2.Scalar(primitive=prim))


def unlit(literal: literals_pb2.Literal) -> Any:
    """The Python value of a primitive, collection or map literal (what the bridge sent)."""
    kind = literal.WhichOneof("value")
    if kind == "collection":
        return [unlit(x) for x in literal.collection.literals]
    if kind == "map":
        return {k: unlit(v) for k, v in literal.map.literals.items()}
    scalar = literal.scalar
    if scalar.WhichOneof("value") == "primitive":
        return getattr(scalar.primitive, scalar.primitive.WhichOneof("value"))
    return str(scalar)


@dataclass
class Run:
    phases: list[int]
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # message for FAILED / TIMED_OUT


@dataclass
class LaunchPlan:
    name: str
    inputs: dict[str, int]  # name -> SimpleType
    runs: list[Run]
    versions: tuple[str, ...] = ("v1",)


@dataclass
class Execution:
    project: str
    domain: str
    name: str
    launch_plan: str
    version: str
    inputs: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    run: Run
    polls: int = 0
    aborted: str | None = None
    # The inputs as sent (a LiteralMap), returned by GetExecutionData as full_inputs.
    input_map: literals_pb2.LiteralMap | None = None

    @property
    def phase(self) -> int:
        if self.aborted is not None:
            return P.ABORTED
        return self.run.phases[min(max(self.polls - 1, 0), len(self.run.phases) - 1)]


class FakeAdmin(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.launch_plans: dict[str, LaunchPlan] = {}
        self._runs_taken: Counter[str] = Counter()
        self.executions: dict[tuple[str, str, str], Execution] = {}
        self.created: list[Execution] = []  # successful CreateExecution calls, in order
        self.terminated: list[tuple[str, str]] = []  # (name, cause)
        self.calls: Counter[str] = Counter()

    # -- test-side setup and inspection ---------------------------------------------------

    def add_launch_plan(
        self, name: str, inputs: dict[str, int], runs: list[Run], versions=("v1",)
    ) -> None:
        with self.lock:
            self.launch_plans[name] = LaunchPlan(name, inputs, runs, tuple(versions))

    def seed_execution(
        self, name: str, launch_plan: str, run: Run, project="ml", domain="development"
    ) -> None:
        """An execution started elsewhere (for trigger and sensor tests); not in ``created``."""
        with self.lock:
            execution = Execution(project, domain, name, launch_plan, "v1", {}, {}, {}, run)
            self.executions[(project, domain, name)] = execution

    def executions_of(self, launch_plan: str) -> list[Execution]:
        with self.lock:
            return [e for e in self.created if e.launch_plan == launch_plan]

    # -- helpers --------------------------------------------------------------------------

    def _lp_proto(
        self, lp: LaunchPlan, project: str, domain: str, version: str
    ) -> launch_plan_pb2.LaunchPlan:
        params = {
            k: interface_pb2.Parameter(
                var=interface_pb2.Variable(type=types_pb2.LiteralType(simple=t))
            )
            for k, t in lp.inputs.items()
        }
        return launch_plan_pb2.LaunchPlan(
            id=identifier_pb2.Identifier(
                resource_type=identifier_pb2.LAUNCH_PLAN,
                project=project,
                domain=domain,
                name=lp.name,
                version=version,
            ),
            spec=launch_plan_pb2.LaunchPlanSpec(
                workflow_id=identifier_pb2.Identifier(
                    resource_type=identifier_pb2.WORKFLOW,
                    project=project,
                    domain=domain,
                    name=lp.name,
                    version=version,
                )
            ),
            closure=launch_plan_pb2.LaunchPlanClosure(
                state=launch_plan_pb2.ACTIVE,
                expected_inputs=interface_pb2.ParameterMap(parameters=params),
                created_at=timestamp_pb2.Timestamp(
                    seconds=1_700_000_000 + lp.versions.index(version)
                ),
            ),
        )

    def _find(self, wf_id: identifier_pb2.WorkflowExecutionIdentifier, context) -> Execution:
        execution = self.executions.get((wf_id.project, wf_id.domain, wf_id.name))
        if execution is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"execution {wf_id.name} not found")
        return execution

    # -- AdminService ---------------------------------------------------------------------

    def GetLaunchPlan(self, request, context):
        with self.lock:
            self.calls["GetLaunchPlan"] += 1
            lp = self.launch_plans.get(request.id.name)
            if lp is None or request.id.version not in lp.versions:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"launch plan {request.id.name}:{request.id.version} not found",
                )
            return self._lp_proto(lp, request.id.project, request.id.domain, request.id.version)

    def ListLaunchPlans(self, request, context):
        with self.lock:
            self.calls["ListLaunchPlans"] += 1
            lp = self.launch_plans.get(request.id.name)
            if lp is None:
                return launch_plan_pb2.LaunchPlanList()
            newest_first = list(reversed(lp.versions))[: request.limit or None]
            return launch_plan_pb2.LaunchPlanList(
                launch_plans=[
                    self._lp_proto(lp, request.id.project, request.id.domain, v)
                    for v in newest_first
                ]
            )

    def CreateExecution(self, request, context):
        with self.lock:
            self.calls["CreateExecution"] += 1
            if not _NAME.fullmatch(request.name):
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"invalid execution name {request.name!r}"
                )
            key = (request.project, request.domain, request.name)
            if key in self.executions:
                context.abort(
                    grpc.StatusCode.ALREADY_EXISTS, f"execution {request.name} already exists"
                )
            lp_id = request.spec.launch_plan
            lp = self.launch_plans.get(lp_id.name)
            if lp is None or lp_id.version not in lp.versions:
                context.abort(
                    grpc.StatusCode.NOT_FOUND, f"launch plan {lp_id.name}:{lp_id.version} not found"
                )
            inputs = {}
            for name, literal in request.inputs.literals.items():
                if name not in lp.inputs:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown input {name!r}")
                value = unlit(literal)
                expected = {
                    SIMPLE.INTEGER: int,
                    SIMPLE.FLOAT: float,
                    SIMPLE.STRING: str,
                    SIMPLE.BOOLEAN: bool,
                }
                want = expected.get(lp.inputs[name])
                if want is not None and type(value) is not want:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"input {name!r}: {value!r} is not {want.__name__}",
                    )
                inputs[name] = value
            labels = dict(request.spec.labels.values)
            annotations = dict(request.spec.annotations.values)
            for k, v in labels.items():
                if not (k8s_key_ok(k) and k8s_value_ok(v)):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid label {k!r}={v!r}")
            for k in annotations:
                if not k8s_key_ok(k):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid annotation key {k!r}")
            taken = self._runs_taken[lp.name]
            self._runs_taken[lp.name] += 1
            run = lp.runs[min(taken, len(lp.runs) - 1)]
            execution = Execution(
                *key, lp.name, lp_id.version, inputs, labels, annotations, run,
                input_map=request.inputs,
            )
            self.executions[key] = execution
            self.created.append(execution)
            return execution_pb2.ExecutionCreateResponse(
                id=identifier_pb2.WorkflowExecutionIdentifier(
                    project=key[0], domain=key[1], name=key[2]
                )
            )

    def GetExecution(self, request, context):
        with self.lock:
            self.calls["GetExecution"] += 1
            execution = self._find(request.id, context)
            execution.polls += 1
            phase = execution.phase
            closure = execution_pb2.ExecutionClosure(phase=phase)
            if execution.aborted is not None:
                closure.abort_metadata.CopyFrom(
                    execution_pb2.AbortMetadata(cause=execution.aborted, principal="airflow")
                )
            elif phase == P.ABORTED:  # scripted: someone aborted it on the Flyte side
                closure.abort_metadata.CopyFrom(
                    execution_pb2.AbortMetadata(
                        cause=execution.run.error or "", principal="alice@example.com"
                    )
                )
            elif phase in (P.FAILED, P.TIMED_OUT) and execution.run.error:
                closure.error.CopyFrom(
                    core_execution_pb2.ExecutionError(
                        code="USER:Error",
                        message=execution.run.error,
                        kind=core_execution_pb2.ExecutionError.USER,
                    )
                )
            return execution_pb2.Execution(
                id=request.id,
                spec=execution_pb2.ExecutionSpec(
                    launch_plan=identifier_pb2.Identifier(
                        resource_type=identifier_pb2.LAUNCH_PLAN,
                        project=execution.project,
                        domain=execution.domain,
                        name=execution.launch_plan,
                        version=execution.version,
                    )
                ),
                closure=closure,
            )

    def GetExecutionData(self, request, context):
        with self.lock:
            self.calls["GetExecutionData"] += 1
            execution = self._find(request.id, context)
            response = execution_pb2.WorkflowExecutionGetDataResponse()
            if execution.input_map is not None:
                response.full_inputs.CopyFrom(execution.input_map)
            if execution.phase == P.SUCCEEDED:
                response.full_outputs.CopyFrom(
                    literals_pb2.LiteralMap(
                        literals={k: lit(v) for k, v in execution.run.outputs.items()}
                    )
                )
            return response

    def TerminateExecution(self, request, context):
        with self.lock:
            self.calls["TerminateExecution"] += 1
            execution = self._find(request.id, context)
            if execution.phase in TERMINAL:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "execution already terminated")
            execution.aborted = request.cause
            self.terminated.append((execution.name, request.cause))
            return execution_pb2.ExecutionTerminateResponse()

    def ListProjects(self, request, context):
        with self.lock:
            self.calls["ListProjects"] += 1
            return project_pb2.Projects()


class TokenEndpoint:
    """An OAuth2 token endpoint (HTTP, loopback) for the client-credentials grant.

    Issues ``token`` only for HTTP basic auth with the expected client id and secret, as an
    identity provider would; records every request (never the secret itself).
    """

    def __init__(self, client_id: str, client_secret: str, token: str) -> None:
        self.expected = (
            "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        )
        self.token = token
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = urllib.parse.parse_qs(
                    self.rfile.read(int(self.headers["Content-Length"])).decode()
                )
                ok = self.headers.get("Authorization") == endpoint.expected
                endpoint.requests.append({"path": self.path, "authorized": ok, "body": body})
                payload = (
                    {"access_token": endpoint.token, "token_type": "Bearer", "expires_in": 3600}
                    if ok and body.get("grant_type") == ["client_credentials"]
                    else {"error": "invalid_client"}
                )
                data = json.dumps(payload).encode()
                self.send_response(200 if "access_token" in payload else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/oauth2/token"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


class FakeAuthMetadata(auth_pb2_grpc.AuthMetadataServiceServicer):
    """What FlyteAdmin tells clients about its identity provider."""

    def __init__(self, token_url: str) -> None:
        self.token_url = token_url

    def GetOAuth2Metadata(self, request, context):
        return auth_pb2.OAuth2MetadataResponse(
            issuer="http://127.0.0.1",
            token_endpoint=self.token_url,
            grant_types_supported=["client_credentials"],
        )

    def GetPublicClientConfig(self, request, context):
        return auth_pb2.PublicClientAuthConfigResponse(
            client_id="flytectl", scopes=["all"], authorization_metadata_key="flyte-authorization"
        )


class RequireBearer(grpc.ServerInterceptor):
    """AdminService answers UNAUTHENTICATED without ``flyte-authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self.header = ("flyte-authorization", f"Bearer {token}")
        self.rejected = 0

    def intercept_service(self, continuation, handler_call_details):
        if handler_call_details.method.startswith("/flyteidl.service.AdminService/"):
            if self.header not in tuple(handler_call_details.invocation_metadata or ()):
                self.rejected += 1

                def deny(request, context):
                    context.abort(
                        grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token"
                    )

                return grpc.unary_unary_rpc_method_handler(deny)
        return continuation(handler_call_details)


@dataclass
class Served:
    server: grpc.Server
    endpoint: str
    tokens: TokenEndpoint
    guard: RequireBearer

    def stop(self) -> None:
        self.server.stop(grace=None)
        self.tokens.httpd.shutdown()


def serve(admin: FakeAdmin, *, client_id: str, client_secret: str) -> Served:
    """FlyteAdmin on a free loopback port, behind OAuth2 client credentials."""
    tokens = TokenEndpoint(
        client_id, client_secret, token="tok-" + base64.b32encode(os.urandom(10)).decode()
    )
    guard = RequireBearer(tokens.token)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=[guard])
    admin_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
    auth_pb2_grpc.add_AuthMetadataServiceServicer_to_server(FakeAuthMetadata(tokens.url), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return Served(server, f"127.0.0.1:{port}", tokens, guard)


__all__ = [
    "FakeAdmin",
    "Run",
    "P",
    "SIMPLE",
    "Served",
    "serve",
    "lit",
    "unlit",
    "k8s_key_ok",
    "k8s_value_ok",
]
