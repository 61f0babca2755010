"""Airflow ``flyte`` connection -> flytekit ``Config`` (no Airflow import: testable on its own).

Fields: host (and port) = the FlyteAdmin gRPC endpoint; login/password = OAuth2 client id
and secret (client-credentials flow, for unattended use); extra = ``{"insecure": true,
"project": "...", "domain": "...", "scopes": [...], "audience": "...", "console_endpoint":
"...", "ca_cert_file_path": "..."}``.
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

from interlock.core.base.errors import InterlockError

if TYPE_CHECKING:
    from flytekit.configuration import Config


class FlyteConnectionError(InterlockError):
    code = "FLYTE_CONNECTION"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def connection_extra(conn: Any) -> dict[str, Any]:
    """The connection's extras; Airflow 2 UI forms store them as ``extra__<conn type>__<name>``
    (``extra__interlock_flyte__``; ``extra__flyte__`` from before the type was renamed)."""
    raw = conn.extra_dejson or {}
    prefixes = ("extra__interlock_flyte__", "extra__flyte__")
    out: dict[str, Any] = {}
    for prefix in reversed(prefixes):  # the current prefix wins
        out.update({k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix) and v not in (None, "")})
    out.update({k: v for k, v in raw.items() if not k.startswith(prefixes)})
    return out


def config_from_connection(conn: Any) -> Config:
    """Build flytekit's ``Config`` from an Airflow connection; the secret stays in memory only."""
    from flytekit.configuration import AuthType, Config, PlatformConfig

    extra = connection_extra(conn)
    host = (conn.host or "").strip()
    for scheme in ("grpc://", "grpcs://", "https://", "http://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/")
    if not host:
        raise FlyteConnectionError(
            f"connection {conn.conn_id!r} has no host",
            hint="set host to the FlyteAdmin gRPC endpoint",
        )
    endpoint = f"{host}:{conn.port}" if conn.port and ":" not in host.rsplit("]", 1)[-1] else host
    scopes = extra.get("scopes") or []
    if isinstance(scopes, str):
        scopes = [s.strip() for s in scopes.split(",") if s.strip()]
    kwargs: dict[str, Any] = {
        "endpoint": endpoint,
        "insecure": _truthy(extra.get("insecure", False)),
        "insecure_skip_verify": _truthy(extra.get("insecure_skip_verify", False)),
        "ca_cert_file_path": extra.get("ca_cert_file_path"),
        "console_endpoint": extra.get("console_endpoint"),
        "scopes": list(scopes),
        "audience": extra.get("audience"),
    }
    if conn.login:
        if not conn.password:
            raise FlyteConnectionError(
                f"connection {conn.conn_id!r} has a client id but no client secret",
                hint="put the OAuth2 client secret in the connection's password field",
            )
        kwargs.update(
            client_id=conn.login,
            client_credentials_secret=conn.password,
            auth_mode=AuthType.CLIENTSECRET,
        )
    return Config(
        platform=PlatformConfig(**kwargs),
        local_sandbox_path=tempfile.mkdtemp(prefix="interlock-flyte-"),
    )
