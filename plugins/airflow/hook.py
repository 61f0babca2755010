"""``FlyteHook``: an Airflow connection of type ``flyte`` -> a ``FlyteRemote``.

Connection fields: host (and port) = the FlyteAdmin gRPC endpoint; login/password = OAuth2
client id and secret (client-credentials flow, for unattended use); extra =
``{"insecure": true, "project": "...", "domain": "...", "namespace": "...", "scopes": [...],
"audience": "...", "console_endpoint": "...", "ca_cert_file_path": "..."}``. ``namespace``
names the Airflow deployment (staging, prod) in every execution name it derives, so two
deployments launching into one project and domain never adopt each other's executions.

The hook speaks to FlyteAdmin through the remote's own client (CreateExecution,
GetExecution, GetExecutionData, TerminateExecution, GetLaunchPlan, ListLaunchPlans). It
never fetches workflows or node executions: the launch plan's interface is enough to type
the inputs, and a poll is one GetExecution call.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import InterlockError
from interlock.plugins.airflow.compat import BaseHook
from interlock.plugins.airflow.connection import config_from_connection, connection_extra
from interlock.plugins.airflow.names import (
    MAX_GENERATIONS,
    execution_name,
    inputs_digest,
    launch_key,
)
from interlock.plugins.airflow.phases import FAILED_OR_ENDING, TERMINAL, Phase, phase_name

if TYPE_CHECKING:
    from flytekit.remote import FlyteRemote


@dataclass(frozen=True)
class ExecutionRef:
    project: str
    domain: str
    name: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class ExecutionStatus:
    ref: ExecutionRef
    phase: Phase
    message: str | None = None  # Flyte's error message, or the abort cause

    @property
    def phase_name(self) -> str:
        return phase_name(self.phase)


@dataclass(frozen=True)
class LaunchResult:
    status: ExecutionStatus
    created: bool  # False: re-attached to an execution a previous try started
    generation: int
    url: str | None
    version: str | None = None  # the launch plan version launched (resolved when unpinned)


class ExecutionMismatch(InterlockError):
    """An execution exists under the name this task derived, but runs other inputs or another
    launch plan version: the bridge refuses to re-attach to it (it would return its outputs
    as this task's)."""

    code = "FLYTE_EXECUTION_MISMATCH"


@dataclass(frozen=True)
class PreparedLaunch:
    """What one launch would send: the resolved launch plan and the typed inputs."""

    launch_plan: Any  # flytekit.models.launch_plan.LaunchPlan, at a concrete version
    inputs: Any  # flytekit.models.literals.LiteralMap
    inputs_sha256: str

    @property
    def version(self) -> str:
        return str(self.launch_plan.id.version)

    @property
    def name(self) -> str:
        return str(self.launch_plan.id.name)


class FlyteHook(BaseHook):
    """Launch, poll, read and terminate Flyte executions through FlyteAdmin."""

    conn_name_attr = "flyte_conn_id"
    default_conn_name = "flyte_default"
    # Not "flyte": flyteorg's airflow-provider-flyte registers that connection type.
    conn_type = "interlock_flyte"
    hook_name = "Flyte (interlock)"

    def __init__(
        self,
        flyte_conn_id: str = default_conn_name,
        *,
        project: str | None = None,
        domain: str | None = None,
        namespace: str | None = None,
        connection: Any = None,
    ) -> None:
        super().__init__()
        self.flyte_conn_id = flyte_conn_id
        self._project = project
        self._domain = domain
        self._namespace = namespace
        self._connection = connection  # a trigger fetches it asynchronously and passes it in
        self._remote: FlyteRemote | None = None

    # Airflow 2.10's UI reads these; Airflow 3 reads provider_info["connection-types"].
    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema"],
            "relabeling": {
                "host": "FlyteAdmin endpoint",
                "login": "Client ID",
                "password": "Client secret",
            },
            "placeholders": {
                "host": "flyte.example.com:443",
                "extra": json.dumps({"insecure": False, "project": "ml", "domain": "production"}),
            },
        }

    @property
    def connection(self) -> Any:
        if self._connection is None:
            self._connection = self.get_connection(self.flyte_conn_id)
        return self._connection

    @property
    def project(self) -> str:
        return self._project or connection_extra(self.connection).get("project") or "flytesnacks"

    @property
    def domain(self) -> str:
        return self._domain or connection_extra(self.connection).get("domain") or "development"

    @property
    def namespace(self) -> str:
        """The deployment's namespace: the operator's, else the connection extra's, else none."""
        if self._namespace is not None:
            return self._namespace
        return str(connection_extra(self.connection).get("namespace") or "")

    def get_conn(self) -> FlyteRemote:
        if self._remote is None:
            from flytekit.remote import FlyteRemote

            self._remote = FlyteRemote(
                config_from_connection(self.connection),
                default_project=self.project,
                default_domain=self.domain,
            )
        return self._remote

    def ref(self, name: str) -> ExecutionRef:
        return ExecutionRef(self.project, self.domain, name)

    def _wf_id(self, ref: ExecutionRef):
        from flytekit.models.core.identifier import WorkflowExecutionIdentifier

        return WorkflowExecutionIdentifier(ref.project, ref.domain, ref.name)

    def console_url(self, ref: ExecutionRef) -> str | None:
        try:
            return self.get_conn().generate_console_url(self._wf_id(ref))
        except Exception:  # a URL is a convenience; never fail a launch over it
            return None

    # -- status ---------------------------------------------------------------------------

    def find(self, name: str) -> ExecutionStatus | None:
        """The execution's status, or None when FlyteAdmin answers NOT_FOUND."""
        found = self._lookup(name)
        return None if found is None else found[0]

    def _lookup(self, name: str) -> tuple[ExecutionStatus, Any] | None:
        """(status, the execution model) from one GetExecution, or None on NOT_FOUND."""
        from flytekit.exceptions.user import FlyteEntityNotExistException

        ref = self.ref(name)
        try:
            execution = self.get_conn().client.get_execution(self._wf_id(ref))
        except FlyteEntityNotExistException:
            return None
        closure = execution.closure
        message = None
        if closure.error is not None and closure.error.message:
            message = closure.error.message
        elif closure.abort_metadata is not None and closure.abort_metadata.cause:
            message = f"aborted by {closure.abort_metadata.principal or 'unknown'}: {closure.abort_metadata.cause}"
        return ExecutionStatus(ref, Phase(closure.phase), message), execution

    def get_status(self, name: str) -> ExecutionStatus:
        status = self.find(name)
        if status is None:
            raise InterlockError(
                f"Flyte execution {self.project}/{self.domain}/{name} does not exist"
            )
        return status

    # -- launch ---------------------------------------------------------------------------

    def _launch_plan(self, name: str, version: str | None):
        from flytekit.models.admin.common import Sort
        from flytekit.models.common import NamedEntityIdentifier
        from flytekit.models.core.identifier import Identifier, ResourceType

        client = self.get_conn().client
        if version:
            return client.get_launch_plan(
                Identifier(ResourceType.LAUNCH_PLAN, self.project, self.domain, name, version)
            )
        # The newest registered version, as flytekit's fetch_launch_plan picks it.
        plans, _ = client.list_launch_plans_paginated(
            NamedEntityIdentifier(self.project, self.domain, name),
            limit=1,
            sort_by=Sort("created_at", Sort.Direction.DESCENDING),
        )
        if not plans:
            raise InterlockError(
                f"launch plan {self.project}/{self.domain}/{name} is not registered",
                hint="register the pipeline on Flyte first (its launch plan carries the pipeline's name)",
            )
        return client.get_launch_plan(plans[0].id)

    def prepare(
        self, launch_plan: str, version: str | None = None, inputs: dict[str, Any] | None = None
    ) -> PreparedLaunch:
        """Resolve the launch plan (newest version when None) and type ``inputs`` by its interface."""
        from interlock.plugins.airflow.literals import to_literal_map

        lp = self._launch_plan(launch_plan, version)
        expected = {k: p.var.type for k, p in lp.closure.expected_inputs.parameters.items()}
        literal_map = to_literal_map(
            self.get_conn().context, inputs or {}, expected, entity=launch_plan
        )
        # Deterministic bytes (map entries sorted), so equal inputs always hash equal.
        data = literal_map.to_flyte_idl().SerializeToString(deterministic=True)
        return PreparedLaunch(lp, literal_map, inputs_digest(data))

    def create_execution(
        self,
        name: str,
        *,
        launch_plan: str,
        version: str | None = None,
        inputs: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        prepared: PreparedLaunch | None = None,
    ) -> bool:
        """CreateExecution under ``name``. Returns False when it already existed (ALREADY_EXISTS)."""
        from flytekit.exceptions.user import FlyteEntityAlreadyExistsException
        from flytekit.models.common import Annotations, Labels
        from flytekit.models.execution import ExecutionMetadata, ExecutionSpec

        if prepared is None:
            prepared = self.prepare(launch_plan, version, inputs)
        spec = ExecutionSpec(
            prepared.launch_plan.id,
            ExecutionMetadata(ExecutionMetadata.ExecutionMode.MANUAL, "airflow", 0),
            labels=Labels(dict(labels or {})),
            annotations=Annotations(dict(annotations or {})),
        )
        try:
            self.get_conn().client.create_execution(
                self.project, self.domain, name, spec, prepared.inputs
            )
        except FlyteEntityAlreadyExistsException:
            return False
        return True

    def launch_or_attach(
        self,
        key: str,
        *,
        launch_plan: str,
        version: str | None = None,
        inputs: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> LaunchResult:
        """Idempotent launch for one logical run (``key``, see ``names.logical_run_key``).

        The launch plan is resolved and the inputs typed first; the execution names hash
        the key together with that version and those inputs (``names.launch_key``), so a
        task re-attaches only to what it would launch now. Walks the names in order: an
        active or succeeded execution is re-attached, after checking that it runs this
        version with these inputs (``ExecutionMismatch`` otherwise); a failed one moves on
        to the next name; the first free name is launched. Names, not XCom, carry the
        state, so a worker that dies between CreateExecution and any bookkeeping still
        cannot cause a duplicate.
        """
        prepared = self.prepare(launch_plan, version, inputs)
        full_key = launch_key(key, version=prepared.version, inputs_sha256=prepared.inputs_sha256)
        for generation in range(MAX_GENERATIONS + 1):
            name = execution_name(full_key, generation)
            found = self._lookup(name)
            if found is not None and found[0].phase in FAILED_OR_ENDING:
                self.log.info("Flyte execution %s ended %s; moving on", name, found[0].phase_name)
                continue
            created = False
            if found is None:
                created = self.create_execution(
                    name,
                    launch_plan=launch_plan,
                    labels=labels,
                    annotations=annotations,
                    prepared=prepared,
                )
                found = self._lookup(name)
                if found is None:
                    raise InterlockError(
                        f"Flyte execution {self.project}/{self.domain}/{name} does not exist "
                        "right after it was created"
                    )
            status, execution = found
            if not created:
                self.verify(name, prepared, execution=execution)
            ref = status.ref
            self.log.info(
                "%s Flyte execution %s/%s/%s (%s, %s version %s)",
                "Launched" if created else "Re-attached to",
                ref.project,
                ref.domain,
                ref.name,
                status.phase_name,
                prepared.name,
                prepared.version,
            )
            return LaunchResult(
                status, created, generation, self.console_url(ref), version=prepared.version
            )
        raise InterlockError(f"more than {MAX_GENERATIONS} failed Flyte executions for one run")

    def verify(self, name: str, prepared: PreparedLaunch, *, execution: Any = None) -> None:
        """Raise ``ExecutionMismatch`` unless execution ``name`` runs ``prepared``'s launch plan
        version with its inputs (inputs it was not given, e.g. launch plan defaults, are not compared)."""
        from interlock.plugins.airflow.literals import to_python

        client = self.get_conn().client
        wf_id = self._wf_id(self.ref(name))
        if execution is None:
            execution = client.get_execution(wf_id)
        theirs = execution.spec.launch_plan
        problems = []
        if (theirs.name, theirs.version) != (prepared.name, prepared.version):
            problems.append(
                f"it runs launch plan {theirs.name} version {theirs.version}, "
                f"this task {prepared.name} version {prepared.version}"
            )
        data = client.get_execution_data(wf_id)
        their_inputs = self._literal_map(data.full_inputs, data.inputs)
        existing = their_inputs.literals if their_inputs is not None else {}
        for input_name, literal in sorted(prepared.inputs.literals.items()):
            other = existing.get(input_name)
            if other is None:
                problems.append(f"input {input_name!r} is not set there")
            elif other != literal:
                problems.append(
                    f"input {input_name!r} is {_clip(to_python(other))} there, "
                    f"{_clip(to_python(literal))} in this task"
                )
        if problems:
            raise ExecutionMismatch(
                f"Flyte execution {self.project}/{self.domain}/{name} exists but was not launched "
                f"for this task: {'; '.join(problems)}. Refusing to re-attach to it",
                hint="another Airflow deployment launching into the same project and domain, or "
                "someone else, created it under this name: give each deployment its own namespace "
                "(the operator's namespace=... or the connection extra \"namespace\")",
            )

    def _literal_map(self, full: Any, url_blob: Any) -> Any:
        """A literal map Admin returned inline, or fetched from the signed URL it offloaded it to."""
        from flyteidl.core import literals_pb2
        from flytekit.core.utils import load_proto_from_file
        from flytekit.models.literals import LiteralMap

        if (full is None or not full.literals) and url_blob is not None and url_blob.url:
            with tempfile.TemporaryDirectory(prefix="interlock-literals-") as tmp:
                local = os.path.join(tmp, "literals.pb")
                self.get_conn().file_access.get_data(url_blob.url, local)
                return LiteralMap.from_flyte_idl(load_proto_from_file(literals_pb2.LiteralMap, local))
        return full

    # -- results and cancellation ---------------------------------------------------------

    def get_outputs(self, name: str) -> dict[str, Any]:
        """The execution's outputs as JSON-able values (see ``literals.to_python``)."""
        from interlock.plugins.airflow.literals import literal_map_to_python

        data = self.get_conn().client.get_execution_data(self._wf_id(self.ref(name)))
        # Large outputs are offloaded: Admin returns a signed URL instead of the map.
        literal_map = self._literal_map(data.full_outputs, data.outputs)
        return literal_map_to_python(literal_map) if literal_map is not None else {}

    def terminate(self, name: str, cause: str) -> bool:
        """TerminateExecution unless it already ended. Returns whether a terminate was sent."""
        from flytekit.exceptions.user import FlyteEntityNotExistException

        status = self.find(name)
        if status is None or status.phase in TERMINAL:
            return False
        try:
            self.get_conn().client.terminate_execution(self._wf_id(status.ref), cause)
        except FlyteEntityNotExistException:
            return False
        self.log.info("Terminated Flyte execution %s: %s", name, cause)
        return True

    def test_connection(self) -> tuple[bool, str]:
        try:
            self.get_conn().client.list_projects_paginated(limit=1)
        except Exception as exc:
            return False, f"FlyteAdmin did not answer: {exc}"
        return True, "FlyteAdmin answered"


def _clip(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
