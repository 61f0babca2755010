"""The classifier is precise: text rules fire only on plausible types, and the common
transient errors of S3, HTTP clients, torch.distributed, TLS and DNS are TRANSIENT.

Every exception here is a real object of the library that raises it (botocore, requests,
urllib3, torch, ssl, socket); a few are raised for real on loopback.
"""

from __future__ import annotations

import socket
import ssl
import threading

import botocore.exceptions
import pytest
import requests
import torch.distributed
import urllib3.exceptions

from interlock.core.base.status import FailureKind
from interlock.core.failure.rules import DEFAULT_RULES, classify

T, C, F = FailureKind.TRANSIENT, FailureKind.CONTENTION, FailureKind.FATAL


def _client_error(code: str, status: int, op: str = "GetObject") -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "msg"}, "ResponseMetadata": {"HTTPStatusCode": status}}, op
    )


def _requests_http_error(status: int) -> requests.exceptions.HTTPError:
    response = requests.models.Response()
    response.status_code = status
    response.url = "https://api.example.test/v1/shards"
    return requests.exceptions.HTTPError(f"{status} Server Error for url: {response.url}", response=response)


def _raised(make):
    try:
        make()
    except BaseException as exc:  # noqa: BLE001 - whatever was raised
        return exc
    raise AssertionError("nothing raised")


def _requests_error_from_urllib3(reason: BaseException) -> BaseException:
    """What requests raises: its ConnectionError while handling urllib3's MaxRetryError."""

    def go():
        try:
            raise urllib3.exceptions.MaxRetryError(None, "/bucket/key", reason) from reason
        except urllib3.exceptions.MaxRetryError as exc:
            raise requests.exceptions.ConnectionError(exc)  # noqa: B904 - as requests does

    return _raised(go)


TRANSIENT_CASES = [
    pytest.param(_client_error("InternalError", 500), "http-retryable-status", id="s3-internal-error-500"),
    pytest.param(_client_error("RequestTimeout", 400, "PutObject"), "http-retryable-status", id="s3-request-timeout-400"),
    pytest.param(_client_error("SlowDown", 503), "throttled", id="s3-slowdown"),
    pytest.param(_client_error("ServiceUnavailable", 503), "throttled", id="s3-503"),
    pytest.param(_client_error("UnknownThing", 503), "http-retryable-status", id="aws-any-503"),
    pytest.param(_requests_http_error(500), "http-retryable-status", id="requests-500"),
    pytest.param(_requests_http_error(502), "http-retryable-status", id="requests-502"),
    pytest.param(requests.exceptions.ConnectionError("Connection aborted."), "connection-dropped", id="requests-connection"),
    pytest.param(requests.exceptions.ReadTimeout("Read timed out. (read timeout=10)"), "connection-dropped", id="requests-read-timeout"),
    pytest.param(requests.exceptions.Timeout("timed out"), "connection-dropped", id="requests-timeout"),
    pytest.param(
        torch.distributed.DistStoreError("Timed out after 901 seconds waiting for clients. 1/2 clients joined."),
        "dist-store", id="torch-dist-store",
    ),
    pytest.param(
        RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.7]:29500"),
        "peer-connection-closed", id="gloo-peer-closed",
    ),
    pytest.param(
        ssl.SSLEOFError(8, "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1006)"),
        "tls-eof", id="ssl-eof-error",
    ),
    pytest.param(
        ssl.SSLError(1, "[SSL: UNEXPECTED_EOF_WHILE_READING] unexpected eof while reading (_ssl.c:2580)"),
        "tls-eof", id="ssl-error-unexpected-eof",
    ),
    pytest.param(
        urllib3.exceptions.MaxRetryError(
            None, "/bucket/key", urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection")
        ),
        "client-retries-exhausted", id="urllib3-max-retry",
    ),
    pytest.param(
        urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
        "connection-dropped", id="urllib3-protocol",
    ),
    pytest.param(
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "dns-temporary", id="dns-eai-again",
    ),
    pytest.param(ConnectionResetError(104, "Connection reset by peer"), "connection-dropped", id="conn-reset"),
    pytest.param(BrokenPipeError(32, "Broken pipe"), "connection-dropped", id="broken-pipe"),
]


@pytest.mark.parametrize(("exc", "rule"), TRANSIENT_CASES)
def test_common_transient_errors_are_transient(exc, rule):
    failure = classify(exc)
    assert (failure.kind, failure.rule) == (T, rule), failure
    assert failure.reason == next(r.reason for r in DEFAULT_RULES if r.name == rule)


def test_a_real_tls_eof_on_loopback_is_transient():
    # A server that accepts and hangs up mid-handshake: what a dropped TLS connection looks like.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def hang_up():
        conn, _ = server.accept()
        conn.recv(1)  # the ClientHello has started arriving
        conn.close()

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    ctx = ssl.create_default_context()
    try:
        with socket.create_connection(server.getsockname(), timeout=5) as raw, pytest.raises(OSError) as caught:
            ctx.wrap_socket(raw, server_hostname="localhost")
    finally:
        t.join(5)
        server.close()
    assert isinstance(caught.value, ssl.SSLError | ConnectionError), caught.value
    assert classify(caught.value).kind is T, (caught.value, classify(caught.value))


def test_dns_temporary_failure_through_requests_is_transient():
    dns = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    exc = _requests_error_from_urllib3(urllib3.exceptions.NameResolutionError("minio.svc", None, dns))
    assert classify(exc).kind is T


def test_untrusted_certificate_is_fatal_even_inside_a_connection_error():
    # requests' SSLError is a ConnectionError; a certificate that is not trusted stays untrusted.
    cert = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate")
    exc = _requests_error_from_urllib3(urllib3.exceptions.SSLError(cert))
    f = classify(exc)
    assert (f.kind, f.rule) == (F, "tls-verify"), f
    assert "CA" in f.hint
    assert classify(requests.exceptions.SSLError("certificate verify failed")).rule == "tls-verify"


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(_requests_http_error(404), id="requests-404"),
        pytest.param(_requests_http_error(501), id="requests-501-not-implemented"),
        pytest.param(_client_error("NoSuchKey", 404), id="s3-no-such-key"),
        pytest.param(_client_error("AccessDenied", 403), id="s3-access-denied"),
    ],
)
def test_client_errors_stay_fatal(exc):
    assert classify(exc).kind is F


# -- negatives: a scary message in a bug's exception is still a bug -------------------------
NEGATIVE = [
    pytest.param(KeyError("user quota exceeded"), id="keyerror-quota"),
    pytest.param(ValueError("Xid column missing"), id="valueerror-xid"),
    pytest.param(ValueError("uncorrectable ECC error column"), id="valueerror-ecc"),
    pytest.param(TypeError("CUDA out of memory is not a str"), id="typeerror-oom"),
    pytest.param(AttributeError("'Config' object has no attribute 'NCCL timed out'"), id="attributeerror-nccl"),
    pytest.param(KeyError("0/8 nodes are available"), id="keyerror-unschedulable"),
    pytest.param(ValueError("Insufficient nvidia.com/gpu in the request spec"), id="valueerror-gpu-capacity"),
    pytest.param(IndexError("SlowDown (SlowDown) Too Many Requests"), id="indexerror-throttle"),
    pytest.param(ValueError("Connection closed by peer"), id="valueerror-peer-closed"),
    pytest.param(LookupError("Temporary failure in name resolution"), id="lookuperror-dns"),
]


@pytest.mark.parametrize("exc", NEGATIVE)
def test_scary_text_in_a_bug_stays_fatal_with_the_generic_hint(exc):
    f = classify(exc)
    assert (f.kind, f.rule) == (F, "unclassified"), f
    assert "bug in the step" in f.hint
    assert "cordon" not in f.hint and "batch size" not in f.hint


def test_a_value_error_with_a_status_attribute_is_not_an_http_error():
    class BadRow(ValueError):
        status = 503  # a field of the user's data, not an HTTP status

    assert classify(BadRow("row 7")).rule == "unclassified"


def test_text_rules_still_fire_on_a_wrapped_runtime_error():
    def go():
        try:
            raise RuntimeError("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
        except RuntimeError as exc:
            raise KeyError("batch 12") from exc

    assert classify(_raised(go)).rule == "gpu-xid"
