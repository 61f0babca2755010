"""``S3Lister``: what ``il.OnData("s3://bucket/prefix/")`` sees, through ``list_objects_v2``.

Each object's version is its ETag (a rewrite of the same key changes it). The client is the
checkpoint store's (the same endpoint override, addressing style and retries); errors name
the operation, the bucket and the key prefix, never credentials.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from interlock.core.base.errors import WatchError
from interlock.core.watch.listing import Listed

from .errors import redact, wrap
from .store import S3CheckpointStore
from .uri import parse_s3_uri


class S3Lister:
    """The ``interlock.object_listers`` plugin for ``s3://``."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def list(self, uri: str, pattern: str) -> list[Listed]:
        bucket, prefix = parse_s3_uri(uri)
        store = S3CheckpointStore.from_uri(uri, client=self._client)
        key_prefix = f"{prefix}/" if prefix else ""
        found: list[Listed] = []
        try:
            pages = store.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix)
            for page in pages:
                for obj in page.get("Contents", []):
                    rest = obj["Key"][len(key_prefix):]
                    if rest and not rest.endswith("/") and fnmatch.fnmatch(rest, pattern):
                        found.append(Listed(f"s3://{bucket}/{obj['Key']}", str(obj.get("ETag", "")).strip('"')))
        except Exception as exc:
            err = wrap(exc, operation="list_objects_v2", where=f"s3://{bucket}/{key_prefix}", endpoint=store.endpoint_url)
            raise WatchError(redact(str(err.message)), hint=err.hint) from exc
        return sorted(found)
