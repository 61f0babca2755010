"""The failure rule table: ``Rule``, ``Classifier``, the built-in ``DEFAULT_RULES`` and the
module's ``default_classifier``.

``classify`` and ``register_rule`` (``il.classify``, ``il.register_rule``) work on that
classifier. How the kinds are chosen is ``taxonomy.py``'s module doc.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from interlock.core.base.errors import (
    CheckpointError,
    PipelineDefinitionError,
    PolicyError,
    SerializationError,
    ValidationFailed,
)
from interlock.core.base.status import FailureKind
from interlock.core.failure.missing_module import install_hint
from interlock.core.failure.record import Failure
from interlock.core.failure.taxonomy import (
    HALVE_BATCH,
    Preempted,
    StepTimeout,
    clip,
    exception_chain,
    failure_kind,
    is_named,
    qualified_name,
    safe_str,
)

Predicate = Callable[[BaseException], bool]


@dataclass(frozen=True)
class Rule:
    """One row of the classification table.

    A rule matches an exception when every criterion it sets holds for that exception:

    - ``types``: classes or qualified names ("torch.cuda.OutOfMemoryError"); an exception
      matches if any class in its MRO is one of them. A name matches the class's own
      qualified name or, if its module is already loaded, what the name refers to there
      (aliases); it never imports anything.
    - ``pattern``: a regex searched in ``str(exc)``. Pair it with ``types`` (the built-in
      text rules use ``TEXT_ERROR_TYPES``), or a bug's message that happens to quote the
      words matches too.
    - ``when``: a predicate on the exception (for codes and attributes).

    ``hint`` says what to change or how to resume: a string, or a function of the matched
    exception returning one; without one the exception's own ``hint`` attribute (interlock
    errors carry one) is used. ``remediation`` marks failures the
    runtime may fix itself (``"halve_batch"``).
    """

    name: str
    kind: FailureKind
    reason: str
    hint: str | Callable[[BaseException], str | None] | None = None
    types: tuple[type[BaseException] | str, ...] = ()
    pattern: str | re.Pattern[str] | None = None
    when: Predicate | None = field(default=None, compare=False)
    remediation: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PolicyError(f"Rule name={self.name!r} must be a non-empty string")
        object.__setattr__(self, "kind", failure_kind(self.kind, f"Rule {self.name!r} kind"))
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise PolicyError(f"Rule {self.name!r} reason={self.reason!r} must be a non-empty string")
        types = self.types
        if isinstance(types, type | str):
            types = (types,)
        types = tuple(types)
        for t in types:
            ok = (isinstance(t, type) and issubclass(t, BaseException)) or (
                isinstance(t, str) and t.strip() == t and t != ""
            )
            if not ok:
                raise PolicyError(
                    f"Rule {self.name!r} types entry {t!r} must be an exception class or a "
                    'qualified name such as "torch.OutOfMemoryError"'
                )
        object.__setattr__(self, "types", types)
        if isinstance(self.pattern, str):
            try:
                object.__setattr__(self, "pattern", re.compile(self.pattern))
            except re.error as exc:
                raise PolicyError(f"Rule {self.name!r} pattern={self.pattern!r} is not a regex: {exc}") from exc
        elif self.pattern is not None and not isinstance(self.pattern, re.Pattern):
            raise PolicyError(f"Rule {self.name!r} pattern={self.pattern!r} must be a regex string")
        if self.hint is not None and not (isinstance(self.hint, str) or callable(self.hint)):
            raise PolicyError(f"Rule {self.name!r} hint={self.hint!r} must be a string or a function of the exception")
        if self.when is not None and not callable(self.when):
            raise PolicyError(f"Rule {self.name!r} when={self.when!r} must be callable")
        if not types and self.pattern is None and self.when is None:
            raise PolicyError(f"Rule {self.name!r} matches everything; give types, pattern or when")

    def _matches_one(self, exc: BaseException) -> bool:
        if self.types:
            classes = tuple(t for t in self.types if isinstance(t, type))
            names = {t for t in self.types if isinstance(t, str)}
            if not (isinstance(exc, classes) or (names and is_named(exc, names))):
                return False
        if self.pattern is not None:
            assert isinstance(self.pattern, re.Pattern)
            if not self.pattern.search(safe_str(exc)):
                return False
        if self.when is not None:
            try:
                if not self.when(exc):
                    return False
            except Exception:  # a faulty predicate is a non-match, never a crash while failing
                return False
        return True

    def match(self, exc: BaseException) -> BaseException | None:
        """The first exception in ``exc``'s chain that this rule matches, or None."""
        for e in exception_chain(exc):
            if self._matches_one(e):
                return e
        return None


# --------------------------------------------------------------------------- the classifier


def _explicit(exc: BaseException) -> tuple[BaseException, FailureKind] | None:
    for e in exception_chain(exc):
        declared = getattr(e, "interlock_failure_kind", None)
        if declared is None:
            continue
        try:
            return e, failure_kind(declared, "interlock_failure_kind")
        except PolicyError:
            continue  # a bad declaration is ignored rather than breaking failure handling
    return None


def _rule_hint(rule: Rule, exc: BaseException) -> str | None:
    if not callable(rule.hint):
        return rule.hint
    try:
        return rule.hint(exc)
    except Exception:  # a faulty hint function is no hint, never a crash while failing
        return None


def _own_hint(exc: BaseException) -> str | None:
    hint = getattr(exc, "hint", None)
    return hint if isinstance(hint, str) and hint else None


class Classifier:
    """An ordered rule table. ``classify(exc)`` never raises on a real exception."""

    def __init__(self, rules: Iterable[Rule] | None = None) -> None:
        self._lock = threading.Lock()
        self._rules: tuple[Rule, ...] = ()
        for rule in DEFAULT_RULES if rules is None else rules:
            self.add(rule, first=False)

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def add(self, rule: Rule, *, first: bool = True, replace: bool = False) -> Rule:
        """Add ``rule`` before every other rule (``first=True``) or after them.

        A rule with the same name raises ``PolicyError`` unless ``replace=True``.
        """
        if not isinstance(rule, Rule):
            raise PolicyError(f"{rule!r} is not a Rule")
        with self._lock:
            rules = list(self._rules)
            clash = [r for r in rules if r.name == rule.name]
            if clash and not replace:
                raise PolicyError(
                    f"a rule named {rule.name!r} exists already",
                    hint="pick another name or pass replace=True",
                )
            rules = [r for r in rules if r.name != rule.name]
            rules = [rule, *rules] if first else [*rules, rule]
            self._rules = tuple(rules)  # swap atomically: classify reads without the lock
        return rule

    def remove(self, name: str) -> Rule:
        with self._lock:
            found = [r for r in self._rules if r.name == name]
            if not found:
                raise PolicyError(f"no rule named {name!r}")
            self._rules = tuple(r for r in self._rules if r.name != name)
        return found[0]

    def copy(self) -> Classifier:
        return Classifier(self._rules)

    def classify(self, exc: BaseException) -> Failure:
        if not isinstance(exc, BaseException):
            raise TypeError(f"classify() needs an exception, got {type(exc).__name__}")
        explicit = _explicit(exc)
        if explicit is not None:
            e, kind = explicit
            return Failure(
                kind=kind,
                reason=f"{qualified_name(type(e))} declares {kind.value}",
                hint=_own_hint(e),
                rule="explicit",
                exc_type=qualified_name(type(e)),
                message=clip(safe_str(e)),
            )
        for rule in self._rules:
            hit = rule.match(exc)
            if hit is not None:
                return Failure(
                    kind=rule.kind,
                    reason=rule.reason,
                    hint=_rule_hint(rule, hit) or _own_hint(hit),
                    rule=rule.name,
                    exc_type=qualified_name(type(hit)),
                    message=clip(safe_str(hit)),
                    remediation=rule.remediation,
                )
        name = qualified_name(type(exc))
        text = safe_str(exc)
        return Failure(
            kind=FailureKind.FATAL,
            reason=clip(f"unclassified {name}: {text}" if text else f"unclassified {name}", 200),
            hint=(
                "most likely a bug in the step (fix it and resume the run with "
                "`interlock run --resume RUN_ID`); an unknown error is treated as FATAL, which the failure "
                "taxonomy never retries, because retrying a deterministic bug burns GPU hours. If this error "
                "is transient, add a rule, "
                f'e.g. il.register_rule(il.Rule("my-rule", il.FailureKind.TRANSIENT, "why", types="{name}")), '
                "or give the exception an interlock_failure_kind attribute"
            ),
            rule="unclassified",
            exc_type=name,
            message=clip(text),
        )


# --------------------------------------------------------------------------- default rules

# Text rules look only at exceptions that plausibly carry a runtime, I/O or service message:
# the messages of CUDA, NCCL, gloo, the kernel, cloud SDKs and Kubernetes arrive as these
# types. A KeyError("user quota exceeded") or a ValueError("Xid column missing") is a bug in
# the step, whatever its text says, and must not buy minutes of backoff or a cordon hint.
# Foreign classes are named, never imported (an unloaded library's class cannot be raised).
TEXT_ERROR_TYPES: tuple[type[BaseException] | str, ...] = (
    RuntimeError,  # torch (CUDA, NCCL, gloo, DistBackendError), most C extensions
    OSError,  # the kernel, sockets, ssl, urllib, requests (RequestException is an OSError)
    "botocore.exceptions.BotoCoreError",
    "botocore.exceptions.ClientError",
    "urllib3.exceptions.HTTPError",
    "kubernetes.client.exceptions.ApiException",
    "kubernetes.client.rest.ApiException",
    "google.api_core.exceptions.GoogleAPIError",
    "grpc.RpcError",
    "aiohttp.ClientError",
)

# 5xx is a server-side failure and worth an immediate retry, except the statuses that say the
# request itself can never work (501 Not Implemented, 505 HTTP Version Not Supported, 511
# Network Authentication Required). 408 and 429 are the client-side timeouts and throttles.
_RETRYABLE_HTTP = frozenset({408, 429, *range(500, 600)}) - {501, 505, 511}
_THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestThrottledException",
        "ServiceUnavailable",
    }
)
# Error codes botocore's own retry handler treats as transient besides throttling: AWS and S3
# send InternalError/RequestTimeout with statuses (500, 400) that say little on their own.
_AWS_TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "IDPCommunicationError",
        "EC2ThrottledException",
        "BandwidthLimitExceeded",
    }
)


def _http_status(exc: BaseException) -> int | None:
    """An HTTP status carried by common client exceptions (botocore, requests, urllib)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int):
            return status
    status = getattr(response, "status_code", None)  # requests HTTPError
    if isinstance(status, int):
        return status
    for attr in ("status_code", "status"):
        status = getattr(exc, attr, None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    if type(exc).__name__ == "HTTPError":  # urllib.error.HTTPError keeps it in .code
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            return code
    return None


def _aws_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None


def _is_retryable_response(exc: BaseException) -> bool:
    code = _aws_code(exc)
    if code in _THROTTLE_CODES or code in _AWS_TRANSIENT_CODES:
        return True
    return _http_status(exc) in _RETRYABLE_HTTP


_TLS_EOF = re.compile(r"UNEXPECTED_EOF|EOF occurred in violation of protocol")


def _is_dns_temporary(exc: BaseException) -> bool:
    eai_again = getattr(socket, "EAI_AGAIN", None)
    if eai_again is not None and getattr(exc, "errno", None) == eai_again:
        return True
    return "Temporary failure in name resolution" in safe_str(exc)


def _is_tls_eof(exc: BaseException) -> bool:
    if is_named(exc, {"ssl.SSLEOFError", "ssl.SSLZeroReturnError"}):
        return True
    return is_named(exc, {"ssl.SSLError"}) and bool(_TLS_EOF.search(safe_str(exc)))


def _is_sigterm_exit(exc: BaseException) -> bool:
    # 143 = 128 + SIGTERM (a shell's view); -15 = killed by SIGTERM (subprocess's view).
    return isinstance(exc, SystemExit) and exc.code in (143, -15)


_CORDON = (
    "cordon the node (kubectl cordon <node>) and report it to the cluster admins; "
    "a retry on the same node fails again"
)

DEFAULT_RULES: tuple[Rule, ...] = (
    # Preemption first: whatever broke while the node was being reclaimed, the cause is the
    # reclaim.
    Rule(
        "preempted",
        FailureKind.PREEMPTED,
        "preempted (SIGTERM: spot reclaim or node drain)",
        "resumes from the latest committed checkpoint; save often with ctx.checkpoint.save",
        types=(Preempted,),
    ),
    Rule(
        "step-timeout",
        FailureKind.TIMEOUT,
        "the step ran past its timeout",
        "raise the step's timeout=..., make it faster, or retry it with il.Retry(timeout=N)",
        types=(StepTimeout,),
    ),
    Rule(
        "sigterm-exit",
        FailureKind.PREEMPTED,
        "exited on SIGTERM (spot reclaim or node drain)",
        "resumes from the latest committed checkpoint",
        types=(SystemExit,),
        when=_is_sigterm_exit,
    ),
    # Hardware and driver: FATAL, and before the network rules (see module doc).
    Rule(
        "gpu-ecc",
        FailureKind.FATAL,
        "uncorrectable GPU ECC error (hardware)",
        _CORDON,
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)uncorrectable ECC error",
    ),
    Rule(
        "gpu-xid",
        FailureKind.FATAL,
        "GPU Xid error (hardware or driver fault)",
        _CORDON,
        types=TEXT_ERROR_TYPES,
        pattern=r"\bXid\b",
    ),
    Rule(
        "gpu-lost",
        FailureKind.FATAL,
        "GPU fell off the bus (hardware)",
        _CORDON,
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)fallen off the bus",
    ),
    Rule(
        "cuda-illegal-address",
        FailureKind.FATAL,
        "CUDA illegal memory access (kernel bug or faulty GPU)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to find the op; if it happens on one node only, " + _CORDON,
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)illegal memory access",
    ),
    Rule(
        "cuda-device-assert",
        FailureKind.FATAL,
        "CUDA device-side assert (a bug, often an index or label out of range)",
        "rerun with CUDA_LAUNCH_BLOCKING=1; check label ranges and embedding indices",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)device-side assert",
    ),
    Rule(
        "cuda-driver-mismatch",
        FailureKind.FATAL,
        "CUDA driver too old for the image's CUDA runtime",
        "rebuild the image with a CUDA version the nodes' driver supports, or run on nodes "
        "with a newer driver (node_selector)",
        types=TEXT_ERROR_TYPES,
        pattern=(
            r"(?i)CUDA driver version is insufficient|NVIDIA driver on your system is too old"
            r"|driver/library version mismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
            r"|forward compatibility was attempted on non supported HW"
        ),
    ),
    Rule(
        "cuda-arch-mismatch",
        FailureKind.FATAL,
        "no CUDA kernel for this GPU architecture",
        "rebuild the image (or torch) with kernels for this GPU, or select matching nodes "
        "with Resources(accelerator=...)",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)no kernel image is available for execution on the device",
    ),
    Rule(
        "no-gpu",
        FailureKind.FATAL,
        "the container sees no GPU",
        "request one with il.Resources(gpu=1, ...) and use an image with the NVIDIA runtime",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)no CUDA-capable device is detected|Found no NVIDIA driver on your system",
    ),
    # Out of memory: FATAL (the same batch fails the same way), remediable on opt-in.
    Rule(
        "cuda-oom",
        FailureKind.FATAL,
        "CUDA out of memory",
        "reduce the batch size, or opt in to il.Retry(oom_remediation=True), which halves "
        "the batch and doubles gradient accumulation",
        types=("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError"),
        remediation=HALVE_BATCH,
    ),
    Rule(
        "cuda-oom-text",
        FailureKind.FATAL,
        "CUDA out of memory",
        "reduce the batch size, or opt in to il.Retry(oom_remediation=True), which halves "
        "the batch and doubles gradient accumulation",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED",
        remediation=HALVE_BATCH,
    ),
    Rule(
        "host-oom",
        FailureKind.FATAL,
        "host out of memory (MemoryError)",
        "request more memory: il.Resources(memory=...)",
        types=(MemoryError,),
    ),
    # interlock's own errors: the exception's hint says what to fix.
    Rule("validation-failed", FailureKind.FATAL, "data validation failed", types=(ValidationFailed,)),
    Rule(
        "config-error",
        FailureKind.FATAL,
        "invalid pipeline or policy configuration",
        types=(PipelineDefinitionError,),
    ),
    Rule("checkpoint-error", FailureKind.FATAL, "checkpoint unreadable", types=(CheckpointError,)),
    Rule(
        "serialization-error",
        FailureKind.FATAL,
        "a value cannot cross the step boundary",
        types=(SerializationError,),
    ),
    # Before "quota-exceeded": a full disk does not free itself.
    Rule(
        "disk-quota",
        FailureKind.FATAL,
        "disk quota exceeded",
        "free space or request more: il.Resources(ephemeral_storage=...)",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)disk quota exceeded|No space left on device",
    ),
    # Before the network rules: requests' SSLError is a ConnectionError, but an untrusted
    # certificate stays untrusted however often the step reruns.
    Rule(
        "tls-verify",
        FailureKind.FATAL,
        "TLS certificate verification failed",
        "trust the server's CA (REQUESTS_CA_BUNDLE, AWS_CA_BUNDLE, SSL_CERT_FILE) or fix the "
        "endpoint URL; a retry fails the same way",
        types=TEXT_ERROR_TYPES,
        pattern=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SSLCertVerificationError",
    ),
    # Contention: capacity may come back; retry with backoff.
    Rule(
        "gpu-capacity",
        FailureKind.CONTENTION,
        "no GPU capacity available",
        "wait, or choose another accelerator or zone",
        types=TEXT_ERROR_TYPES,
        pattern=(
            r"Insufficient nvidia\.com/gpu|InsufficientInstanceCapacity|ZONE_RESOURCE_POOL_EXHAUSTED"
            r"|does not have enough resources available to fulfill the request"
        ),
    ),
    Rule(
        "unschedulable",
        FailureKind.CONTENTION,
        "pod cannot be scheduled now",
        "if it never schedules, check node selectors, tolerations and resource requests",
        types=TEXT_ERROR_TYPES,
        pattern=r"\b0/\d+ nodes are available|FailedScheduling|\bUnschedulable\b",
    ),
    Rule(
        "quota-exceeded",
        FailureKind.CONTENTION,
        "resource quota exceeded",
        "wait for other jobs to finish, or ask for a larger quota",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)quota exceeded|exceeded quota|QuotaExceeded|exceeds? (?:the )?(?:\w+ )?quota|(?:Vcpu|Instance)LimitExceeded",
    ),
    Rule(
        "gpu-busy",
        FailureKind.CONTENTION,
        "GPU busy or unavailable (held by another process)",
        "wait; if it persists, look for a stale process on the node",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?i)CUDA-capable device.{0,12}?busy or unavailable",
    ),
    # Transient: flakes; retry at once.
    Rule(
        "nccl-watchdog-timeout",
        FailureKind.TRANSIENT,
        "NCCL watchdog timeout",
        "if it recurs, look for a straggling rank (NCCL_DEBUG=INFO) or raise the timeout",
        types=TEXT_ERROR_TYPES,
        pattern=r"Watchdog caught collective operation timeout",
    ),
    Rule(
        "nccl-timeout",
        FailureKind.TRANSIENT,
        "NCCL timeout",
        "if it recurs, look for a straggling rank (NCCL_DEBUG=INFO) or raise the timeout",
        types=TEXT_ERROR_TYPES,
        pattern=r"(?is)NCCL.{0,300}?\btime[d ]?[ -]?out",
    ),
    Rule(
        "nccl-network",
        FailureKind.TRANSIENT,
        "NCCL network error (a peer exited or a link dropped)",
        "if it recurs, run with NCCL_DEBUG=INFO; 'unhandled system error' inside containers "
        "often means /dev/shm is too small: set il.Resources(shared_memory=...)",
        types=TEXT_ERROR_TYPES,
        pattern=(
            r"(?is)NCCL.{0,300}?(?:unhandled system error|remote process exited|"
            r"connection closed by (?:remote )?peer|network error)"
            r"|remote process exited or there was a network error"
        ),
    ),
    Rule(
        "gloo-network",
        FailureKind.TRANSIENT,
        "gloo collective failed (a peer exited, a link dropped, or a rank stalled past the timeout)",
        "if it recurs, look for a straggling or crashed rank; its own error is the cause",
        # A closed connection alone is peer-connection-closed (below), whatever the transport.
        types=(RuntimeError,),  # gloo raises RuntimeError
        pattern=r"(?is)gloo.{0,300}?(?:connection (?:reset|refused)|timed out|read error|write error)",
    ),
    Rule(
        "dist-network",
        FailureKind.TRANSIENT,
        "torch.distributed network error",
        types=("torch.distributed.DistNetworkError",),
    ),
    Rule(
        "dist-store",
        FailureKind.TRANSIENT,
        "torch.distributed store (rendezvous) error",
        "if it recurs, check that the master address is reachable from every rank",
        types=("torch.distributed.DistStoreError",),
    ),
    Rule(
        "peer-connection-closed",
        FailureKind.TRANSIENT,
        "a peer closed the connection (gloo, a worker or a server went away)",
        "if it recurs, look at the other ranks' logs: the first rank to fail is the cause",
        types=(RuntimeError,),  # gloo and torch raise RuntimeError; sockets have connection-dropped
        pattern=r"(?i)connection (?:closed|reset) by (?:remote )?peer|\bBroken pipe\b",
    ),
    Rule(
        "throttled",
        FailureKind.TRANSIENT,
        "throttled by the service",
        "if it recurs, lower request concurrency",
        types=TEXT_ERROR_TYPES,
        pattern=(
            r"\((?:" + "|".join(sorted(_THROTTLE_CODES)) + r")\)"
            r"|\bSlowDown\b|\bToo Many Requests\b|\bService Unavailable\b|\bRate exceeded\b"
            r"|\bHTTP Error (?:429|503)\b|\b(?:429|503) (?:Client|Server) Error\b"
        ),
    ),
    Rule(
        "http-retryable-status",
        FailureKind.TRANSIENT,
        "throttled, timed out or server error (HTTP 408/429/5xx, or an AWS transient error code)",
        "if it recurs, lower request concurrency or check the service's health",
        types=TEXT_ERROR_TYPES,
        when=_is_retryable_response,
    ),
    Rule(
        "dns-temporary",
        FailureKind.TRANSIENT,
        "temporary DNS failure (EAI_AGAIN)",
        "if it recurs, check the cluster's DNS (CoreDNS) load",
        types=TEXT_ERROR_TYPES,
        when=_is_dns_temporary,
    ),
    Rule(
        "tls-eof",
        FailureKind.TRANSIENT,
        "TLS connection closed mid-stream (unexpected EOF)",
        types=TEXT_ERROR_TYPES,
        when=_is_tls_eof,
    ),
    Rule(
        "client-retries-exhausted",
        FailureKind.TRANSIENT,
        "the HTTP client gave up after its own retries (connection or server errors)",
        "if it recurs, check the service's health and the network path to it",
        types=("urllib3.exceptions.MaxRetryError",),
    ),
    Rule(
        "connection-dropped",
        FailureKind.TRANSIENT,
        "network connection dropped",
        types=(
            ConnectionError,
            "botocore.exceptions.EndpointConnectionError",
            "botocore.exceptions.ConnectionClosedError",
            "botocore.exceptions.ConnectTimeoutError",
            "botocore.exceptions.ReadTimeoutError",
            "urllib3.exceptions.ProtocolError",
            "urllib3.exceptions.NewConnectionError",
            "urllib3.exceptions.TimeoutError",
            "http.client.IncompleteRead",
            "botocore.exceptions.ResponseStreamingError",
            "requests.exceptions.ConnectionError",
            "requests.exceptions.Timeout",
        ),
    ),
    Rule("timeout", FailureKind.TRANSIENT, "operation timed out", types=(TimeoutError,)),
    # A missing library is the environment's fault, not the step's, and no retry installs it.
    Rule(
        "missing-module",
        FailureKind.FATAL,
        "a module the step imports is not installed",
        install_hint,
        types=(ModuleNotFoundError,),
    ),
    Rule(
        "interrupted",
        FailureKind.FATAL,
        "interrupted (KeyboardInterrupt)",
        "not retried: someone stopped the run",
        types=(KeyboardInterrupt,),
    ),
)

default_classifier = Classifier()


def classify(exc: BaseException) -> Failure:
    """Classify ``exc`` with the default classifier (``il.classify``)."""
    return default_classifier.classify(exc)


def register_rule(rule: Rule, *, first: bool = True, replace: bool = False) -> Rule:
    """Add ``rule`` to the default classifier, ahead of the built-in rules by default."""
    return default_classifier.add(rule, first=first, replace=replace)
