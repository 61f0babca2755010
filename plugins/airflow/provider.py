"""Airflow provider metadata, found through the ``apache_airflow_provider`` entry point.

Stdlib only: Airflow's providers manager imports it while it discovers providers, long
before any hook or operator is needed.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

_PKG = "interlock.plugins.airflow"
_INTEGRATION = "Flyte (interlock)"


def _version() -> str:
    try:
        return metadata.version("interlock")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _field(label: str, kind: str, description: str, default: Any = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": [kind, "null"]}
    if default is not None:
        schema["default"] = default
    return {"label": label, "schema": schema, "description": description}


def get_provider_info() -> dict[str, Any]:
    return {
        # Must equal the distribution name: Airflow checks it against the installed package.
        "package-name": "interlock",
        "name": "interlock: Airflow-to-Flyte trigger bridge",
        "description": "Launch interlock pipelines (Flyte launch plans) from Airflow, idempotently, "
        "and wait for them in the triggerer.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://docs.flyte.org/",
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": _INTEGRATION, "python-modules": [f"{_PKG}.operators"]}],
        "sensors": [{"integration-name": _INTEGRATION, "python-modules": [f"{_PKG}.sensors"]}],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": [f"{_PKG}.hook"]}],
        "triggers": [{"integration-name": _INTEGRATION, "python-modules": [f"{_PKG}.triggers"]}],
        "extra-links": [f"{_PKG}.operators.FlyteExecutionLink"],
        "connection-types": [
            {
                "hook-class-name": f"{_PKG}.hook.FlyteHook",
                "connection-type": "interlock_flyte",  # "flyte" is flyteorg's provider's
                "hook-name": "Flyte (interlock)",
                "conn-fields": {
                    "insecure": _field(
                        "Insecure (no TLS)",
                        "boolean",
                        "plaintext gRPC, e.g. a local sandbox",
                        False,
                    ),
                    "project": _field("Project", "string", "default Flyte project", "flytesnacks"),
                    "domain": _field("Domain", "string", "default Flyte domain", "development"),
                    "namespace": _field(
                        "Deployment namespace",
                        "string",
                        "names this Airflow deployment (staging, prod) in execution names, "
                        "so deployments sharing a Flyte project never adopt each other's runs",
                    ),
                    "scopes": _field(
                        "OAuth2 scopes", "string", "comma-separated scopes for client credentials"
                    ),
                    "audience": _field(
                        "OAuth2 audience", "string", "audience for client credentials"
                    ),
                    "console_endpoint": _field("Console URL", "string", "for links to executions"),
                    "ca_cert_file_path": _field(
                        "CA certificate file", "string", "custom CA bundle for TLS"
                    ),
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {
                        "host": "FlyteAdmin endpoint",
                        "login": "Client ID",
                        "password": "Client secret",
                    },
                    "placeholders": {"host": "flyte.example.com:443"},
                },
            }
        ],
    }
