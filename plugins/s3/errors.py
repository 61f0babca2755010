"""botocore errors as interlock errors: a stable code, a retryable flag and a hint.

Messages name the operation, the bucket and the object, the service's error code and its
message; never credentials. Anything that looks like an access key, and the values of the
credential variables in the environment, are blanked in case a server echoes them.
"""

from __future__ import annotations

import os
import re

from interlock.core.base.errors import CheckpointError

# Retrying the same request later can help (throttling, a server hiccup, a dropped link).
RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "OperationAborted",
    }
)
_CREDENTIAL_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AuthorizationHeaderMalformed",
    }
)
_CONNECTION_ERRORS = (
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ResponseStreamingError",
    "IncompleteReadError",
    "ProtocolError",
)
_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b")


class S3StoreError(CheckpointError):
    """An S3 request of the checkpoint store failed.

    ``s3_code`` is the service's error code (``AccessDenied``, ``NoSuchBucket``,
    ``SlowDown``...) or the botocore exception name for a connection failure; ``status``
    the HTTP status when there was a response. ``retryable`` errors also declare
    themselves TRANSIENT to interlock's failure classifier, so a throttled checkpoint
    save retries the step instead of failing it for good.
    """

    code = "CHECKPOINT_S3"

    def __init__(
        self,
        message: str,
        *,
        s3_code: str,
        status: int | None = None,
        retryable: bool = False,
        hint: str | None = None,
    ) -> None:
        super().__init__(redact(message), hint=redact(hint) if hint else None)
        self.s3_code = s3_code
        self.status = status
        self.retryable = retryable
        self.interlock_failure_kind = "TRANSIENT" if retryable else "FATAL"


def redact(text: str) -> str:
    """``text`` without access key ids or the environment's credential values."""
    text = _KEY_ID.sub("<redacted>", text)
    for var in _CREDENTIAL_ENV:
        value = os.environ.get(var)
        if value and len(value) >= 4:
            text = text.replace(value, "<redacted>")
    return text


def error_code(exc: BaseException) -> str | None:
    """The service's error code of a botocore ClientError, or None."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status is not None else None
    return None


def is_missing(exc: BaseException) -> bool:
    """A 404 for an object (GET says NoSuchKey, HEAD only says 404)."""
    return error_code(exc) in ("NoSuchKey", "404", "NotFound") or (
        error_code(exc) is not None and _status(exc) == 404 and error_code(exc) != "NoSuchBucket"
    )


def wrap(exc: BaseException, *, operation: str, where: str, endpoint: str | None) -> S3StoreError:
    """An S3StoreError for ``exc`` raised by ``operation`` on ``where`` (an s3:// URI)."""
    # boto3's upload helpers wrap the ClientError; the cause has the code.
    cause = exc.__cause__ if type(exc).__name__ == "S3UploadFailedError" and exc.__cause__ else exc
    code = error_code(cause)
    status = _status(cause)
    at = f" at {endpoint}" if endpoint else ""
    if code is not None:
        detail = cause.response.get("Error", {}).get("Message") or ""  # type: ignore[attr-defined]
        message = f"S3 {operation} on {where} failed: {code} (HTTP {status}){': ' + detail if detail else ''}"
        retryable = code in RETRYABLE_CODES or status in (429, 500, 502, 503, 504)
        hint = None
        if code == "NoSuchBucket":
            hint = f"the bucket does not exist{at}: create it, or fix the store URI (s3://bucket/prefix) and the endpoint"
        elif code in _CREDENTIAL_CODES or status == 403:
            hint = (
                "check the credentials (standard AWS chain: environment, ~/.aws, instance or pod role) "
                "and that they allow s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject "
                "on the bucket and prefix"
            )
        elif retryable:
            hint = "the service is throttling or unavailable; the step is retried (TRANSIENT)"
        return S3StoreError(message, s3_code=code, status=status, retryable=retryable, hint=hint)
    name = type(cause).__name__
    if name in _CONNECTION_ERRORS or isinstance(cause, ConnectionError | TimeoutError):
        return S3StoreError(
            f"S3 {operation} on {where} failed: cannot reach the S3 endpoint{at} ({name})",
            s3_code=name,
            retryable=True,
            hint="check the endpoint (endpoint_url, INTERLOCK_S3_ENDPOINT_URL or AWS_ENDPOINT_URL) and the network",
        )
    if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
        return S3StoreError(
            f"S3 {operation} on {where} failed: no usable credentials ({name})",
            s3_code=name,
            hint="provide credentials through the standard AWS chain: AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, a profile in ~/.aws, or an instance or pod role",
        )
    return S3StoreError(f"S3 {operation} on {where} failed: {name}: {exc}", s3_code=name)


def is_boto_error(exc: BaseException) -> bool:
    """An exception from botocore, s3transfer, boto3 or urllib3 (not one of ours)."""
    module = type(exc).__module__ or ""
    return module.split(".")[0] in ("botocore", "s3transfer", "boto3", "urllib3")

