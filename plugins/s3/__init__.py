"""S3 checkpoint store on boto3 (``pip install 'interlock[s3]'``).

``CheckpointPolicy(store="s3://bucket/prefix")`` makes the runtime use
``S3CheckpointStore.from_uri(...)``; the endpoint (MinIO, moto) comes from
``INTERLOCK_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL``, credentials from the standard AWS
chain. boto3 is imported on first use, so importing this package never needs it.
"""

from __future__ import annotations

from .errors import S3StoreError
from .layout import KeyLayout
from .store import S3CheckpointStore
from .uri import ENDPOINT_ENV, parse_s3_uri

__all__ = ["ENDPOINT_ENV", "KeyLayout", "S3CheckpointStore", "S3StoreError", "parse_s3_uri"]
