"""``s3://bucket/prefix`` URIs and the endpoint override (MinIO, moto, other S3 servers)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from interlock.core.base.errors import CheckpointError

# The first one set wins; AWS_ENDPOINT_URL is botocore's own variable.
ENDPOINT_ENV = ("INTERLOCK_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL")

# Loose on purpose (MinIO and others accept more than AWS); what S3 never accepts is refused.
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket/some/prefix``; the prefix has no edge slashes."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise CheckpointError(
            f"not an S3 URI: {uri!r}", hint='write it as "s3://bucket" or "s3://bucket/prefix"'
        )
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket):
        raise CheckpointError(
            f"invalid bucket name {bucket!r} in {uri!r}",
            hint='write it as "s3://bucket" or "s3://bucket/prefix"',
        )
    return bucket, prefix.strip("/")


def endpoint_from_env(env: Mapping[str, str] | None = None) -> str | None:
    source: Mapping[str, str] = os.environ if env is None else env
    for var in ENDPOINT_ENV:
        value = source.get(var, "").strip()
        if value:
            return value
    return None


def display_endpoint(url: str | None) -> str | None:
    """The endpoint without any ``user:password@`` part, for messages and reprs."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
