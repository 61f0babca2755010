"""``FlyteHook``: an Airflow connection of type ``flyte`` -> a ``FlyteRemote``.

Connection fields: host (and port) = the FlyteAdmin gRPC endpoint; login/password = OAuth2
client id and secret (client-credentials flow, for unattended use); extra =
``{"insecure": true, "project": "...", "domain": "...", "scopes": [...], "audience": "...",
"console_endpoint": "...", "ca_cert_file_path": "..."}``.

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

from interlock.core.errors import InterlockError
from interlock.plugins.airflow.compat import BaseHook
from interlock.plugins.airflow.connection import config_from_connection, connection_extra
from interlock.plugins.airflow.names import MAX_GENERATIONS, execution_name
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


class FlyteHook(BaseHook):
    """Launch, poll, read and terminate Flyte executions through FlyteAdmin."""

    conn_name_attr = "flyte_conn_id"
    default_conn_name = "flyte_default"
    conn_type = "flyte"
    hook_name = "Flyte"

    def __init__(
        self,
        flyte_conn_id: str = default_conn_name,
        *,
        project: str | None = None,
        domain: str | None = None,
        connection: Any = None,
    ) -> None:
        super().__init__()
        self.flyte_conn_id = flyte_conn_id
        self._project = project
        self._domain = domain
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
        return ExecutionStatus(ref, Phase(closure.phase), message)

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

    def create_execution(
        self,
        name: str,
        *,
        launch_plan: str,
        version: str | None = None,
        inputs: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> bool:
        """CreateExecution under ``name``. Returns False when it already existed (ALREADY_EXISTS)."""
        from flytekit.exceptions.user import FlyteEntityAlreadyExistsException
        from flytekit.models.common import Annotations, Labels
        from flytekit.models.execution import ExecutionMetadata, ExecutionSpec

        from interlock.plugins.airflow.literals import to_literal_map

        remote = self.get_conn()
        lp = self._launch_plan(launch_plan, version)
        expected = {k: p.var.type for k, p in lp.closure.expected_inputs.parameters.items()}
        literal_map = to_literal_map(remote.context, inputs or {}, expected, entity=launch_plan)
        spec = ExecutionSpec(
            lp.id,
            ExecutionMetadata(ExecutionMetadata.ExecutionMode.MANUAL, "airflow", 0),
            labels=Labels(dict(labels or {})),
            annotations=Annotations(dict(annotations or {})),
        )
        try:
            remote.client.create_execution(self.project, self.domain, name, spec, literal_map)
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

        Walks the run's deterministic execution names in order: an active or succeeded
        execution is re-attached; a failed one moves on to the next name; the first free
        name is launched. Names, not XCom, carry the state, so a worker that dies between
        CreateExecution and any bookkeeping still cannot cause a duplicate.
        """
        for generation in range(MAX_GENERATIONS + 1):
            name = execution_name(key, generation)
            status = self.find(name)
            if status is not None and status.phase in FAILED_OR_ENDING:
                self.log.info("Flyte execution %s ended %s; moving on", name, status.phase_name)
                continue
            created = False
            if status is None:
                created = self.create_execution(
                    name,
                    launch_plan=launch_plan,
                    version=version,
                    inputs=inputs,
                    labels=labels,
                    annotations=annotations,
                )
                status = self.get_status(name)
            ref = status.ref
            self.log.info(
                "%s Flyte execution %s/%s/%s (%s)",
                "Launched" if created else "Re-attached to",
                ref.project,
                ref.domain,
                ref.name,
                status.phase_name,
            )
            return LaunchResult(status, created, generation, self.console_url(ref))
        raise InterlockError(f"more than {MAX_GENERATIONS} failed Flyte executions for one run")

    # -- results and cancellation ---------------------------------------------------------

    def get_outputs(self, name: str) -> dict[str, Any]:
        """The execution's outputs as JSON-able values (see ``literals.to_python``)."""
        from flyteidl.core import literals_pb2
        from flytekit.core.utils import load_proto_from_file
        from flytekit.models.literals import LiteralMap

        from interlock.plugins.airflow.literals import literal_map_to_python

        remote = self.get_conn()
        data = remote.client.get_execution_data(self._wf_id(self.ref(name)))
        literal_map = data.full_outputs
        if (
            (literal_map is None or not literal_map.literals)
            and data.outputs is not None
            and data.outputs.url
        ):
            # Large outputs are offloaded: Admin returns a signed URL instead of the map.
            with tempfile.TemporaryDirectory(prefix="interlock-outputs-") as tmp:
                local = os.path.join(tmp, "outputs.pb")
                remote.file_access.get_data(data.outputs.url, local)
                literal_map = LiteralMap.from_flyte_idl(
                    load_proto_from_file(literals_pb2.LiteralMap, local)
                )
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
