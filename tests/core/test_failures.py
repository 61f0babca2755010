"""The failure classifier, over real exception objects from torch, botocore, sockets and files."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
from email.message import Message

import botocore.exceptions
import pytest
import torch
import torch.distributed

from interlock.core.base.errors import PipelineDefinitionError, PolicyError, ValidationFailed
from interlock.core.base.status import FailureKind
from interlock.core.failure.record import Failure
from interlock.core.failure.rules import (
    DEFAULT_RULES,
    Classifier,
    Rule,
    classify,
    default_classifier,
    register_rule,
)
from interlock.core.failure.taxonomy import HALVE_BATCH, Preempted, exception_chain

T, C, F, P = FailureKind.TRANSIENT, FailureKind.CONTENTION, FailureKind.FATAL, FailureKind.PREEMPTED


def _client_error(code: str, status: int, op: str = "PutObject") -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "msg"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        op,
    )


def _http_error(code: int, msg: str) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://registry.local/v2/", code, msg, Message(), None)


WATCHDOG = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, "
    "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
    "600043 milliseconds before timing out."
)

# (exception, kind, rule) over real exception objects; no mocks.
CASES = [
    pytest.param(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), F, "cuda-oom", id="torch-oom"),
    pytest.param(RuntimeError("CUDA error: out of memory"), F, "cuda-oom-text", id="oom-text"),
    pytest.param(torch.distributed.DistBackendError(WATCHDOG), T, "nccl-watchdog-timeout", id="nccl-watchdog"),
    pytest.param(
        torch.distributed.DistBackendError("NCCL communicator was aborted on rank 1: operation timed out"),
        T, "nccl-timeout", id="nccl-timeout",
    ),
    pytest.param(
        RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.19.3"),
        T, "nccl-network", id="nccl-system-error",
    ),
    pytest.param(
        torch.distributed.DistBackendError("NCCL error: remote process exited or there was a network error"),
        T, "nccl-network", id="nccl-remote-exited",
    ),
    pytest.param(torch.distributed.DistNetworkError("Connection closed by peer [10.0.0.7]:29500"), T, "dist-network", id="dist-network"),
    # gloo (the CPU backend) reports a dead peer or a stalled one as a plain RuntimeError.
    pytest.param(
        RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                     "[127.0.0.1]:24981: Connection reset by peer"),
        T, "gloo-network", id="gloo-reset",
    ),
    pytest.param(
        RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms "
                     "for recv operation to complete"),
        T, "gloo-network", id="gloo-stalled-peer",
    ),
    pytest.param(
        RuntimeError("NVRM: Xid (PCI:0000:3b:00): 79, pid=2207, GPU has fallen off the bus."),
        F, "gpu-xid", id="xid",
    ),
    pytest.param(RuntimeError("CUDA error: uncorrectable ECC error encountered"), F, "gpu-ecc", id="ecc"),
    pytest.param(RuntimeError("CUDA error: an illegal memory access was encountered"), F, "cuda-illegal-address", id="illegal-address"),
    pytest.param(RuntimeError("CUDA error: device-side assert triggered"), F, "cuda-device-assert", id="device-assert"),
    pytest.param(
        RuntimeError("CUDA driver version is insufficient for CUDA runtime version"),
        F, "cuda-driver-mismatch", id="driver-insufficient",
    ),
    pytest.param(
        RuntimeError("The NVIDIA driver on your system is too old (found version 11040)."),
        F, "cuda-driver-mismatch", id="driver-too-old",
    ),
    pytest.param(
        RuntimeError("CUDA error: no kernel image is available for execution on the device"),
        F, "cuda-arch-mismatch", id="arch-mismatch",
    ),
    pytest.param(RuntimeError("No CUDA GPUs are available; no CUDA-capable device is detected"), F, "no-gpu", id="no-gpu"),
    pytest.param(
        RuntimeError("0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes"),
        C, "gpu-capacity", id="insufficient-gpu",
    ),
    pytest.param(
        RuntimeError("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."),
        C, "unschedulable", id="unschedulable",
    ),
    pytest.param(
        RuntimeError('pods "train-0" is forbidden: exceeded quota: gpu-quota, requested: nvidia.com/gpu=8'),
        C, "quota-exceeded", id="k8s-quota",
    ),
    pytest.param(RuntimeError("Quota exceeded for quota metric 'GPUs (all regions)'"), C, "quota-exceeded", id="cloud-quota"),
    pytest.param(
        RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable"),
        C, "gpu-busy", id="gpu-busy",
    ),
    pytest.param(_client_error("SlowDown", 503), T, "throttled", id="s3-slowdown"),
    pytest.param(_client_error("ThrottlingException", 400, "InvokeModel"), T, "throttled", id="aws-throttling"),
    pytest.param(_client_error("InternalError", 503), T, "http-retryable-status", id="s3-503-by-status"),
    pytest.param(_http_error(429, "Too Many Requests"), T, "throttled", id="urllib-429"),
    pytest.param(_http_error(504, "Gateway Time-out"), T, "http-retryable-status", id="urllib-504"),
    pytest.param(
        botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1/bucket"),
        T, "connection-dropped", id="botocore-endpoint",
    ),
    pytest.param(ConnectionResetError(104, "Connection reset by peer"), T, "connection-dropped", id="conn-reset"),
    pytest.param(ValidationFailed("3 rows fail check amount >= 0"), F, "validation-failed", id="validation"),
    pytest.param(PolicyError("Backoff first='0s' must be longer than 0s"), F, "config-error", id="policy"),
    pytest.param(PipelineDefinitionError("cycle", pipeline="p"), F, "config-error", id="definition"),
    pytest.param(MemoryError(), F, "host-oom", id="host-oom"),
    pytest.param(OSError(122, "Disk quota exceeded"), F, "disk-quota", id="disk-quota-not-contention"),
    pytest.param(Preempted(), P, "preempted", id="preempted"),
    pytest.param(SystemExit(143), P, "sigterm-exit", id="exit-143"),
    pytest.param(SystemExit(-15), P, "sigterm-exit", id="exit-minus-15"),
    pytest.param(SystemExit(1), F, "unclassified", id="exit-1"),
    pytest.param(KeyboardInterrupt(), F, "interrupted", id="ctrl-c"),
    pytest.param(ValueError("shapes (32,10) and (12,) not aligned"), F, "unclassified", id="bug"),
    pytest.param(_client_error("AccessDenied", 403, "GetObject"), F, "unclassified", id="s3-403"),
]


@pytest.mark.parametrize(("exc", "kind", "rule"), CASES)
def test_default_table(exc, kind, rule):
    failure = classify(exc)
    assert (failure.kind, failure.rule) == (kind, rule), failure
    assert failure.reason
    if rule != "unclassified":
        assert failure.reason == next(r.reason for r in DEFAULT_RULES if r.name == rule)


def test_oom_names_the_fix_and_is_remediable():
    f = classify(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert f.exc_type == "torch.OutOfMemoryError"
    assert "batch size" in f.hint and "oom_remediation" in f.hint
    assert f.remediation == HALVE_BATCH
    assert f.message.startswith("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_hardware_hint_says_cordon_and_driver_hint_says_rebuild():
    assert "cordon" in classify(RuntimeError("Xid 48: DBE")).hint
    assert "rebuild the image" in classify(RuntimeError("CUDA driver version is insufficient")).hint


def test_validation_failed_keeps_its_own_hint():
    f = classify(ValidationFailed("bad rows", hint="drop rows with negative amounts"))
    assert f.hint == "drop rows with negative amounts"


def test_unclassified_is_fatal_and_says_how_to_add_a_rule():
    f = classify(KeyError("feature_17"))
    assert f.kind is F
    assert f.reason == "unclassified KeyError: 'feature_17'"
    assert "GPU hours" in f.hint and 'types="KeyError"' in f.hint
    assert f.exc_type == "KeyError"


def test_real_socket_errors_are_transient():
    # A refused connection and a read timeout, both from the kernel, on loopback only.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(ConnectionRefusedError) as refused:
        socket.create_connection(("127.0.0.1", port), timeout=2)
    assert classify(refused.value).kind is T

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        client = socket.create_connection(server.getsockname(), timeout=0.05)
        with client, pytest.raises(TimeoutError) as timed_out:
            client.recv(1)  # nobody ever sends
        f = classify(timed_out.value)
        assert (f.kind, f.rule) == (T, "timeout")
    finally:
        server.close()


def test_real_disk_full_is_fatal():
    with pytest.raises(OSError) as full:
        with open("/dev/full", "w") as fh:  # Linux: every write fails with ENOSPC
            fh.write("x")
            fh.flush()
    f = classify(full.value)
    assert (f.kind, f.rule) == (F, "disk-quota")


# --------------------------------------------------------------------------- chains


def _raised(make):
    try:
        make()
    except BaseException as exc:  # noqa: BLE001 - we want whatever was raised
        return exc
    raise AssertionError("nothing raised")


def test_cause_is_classified_through_a_wrapper():
    def go():
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        except RuntimeError as exc:
            raise ValueError("training step 1200 failed") from exc

    f = classify(_raised(go))
    assert (f.kind, f.rule, f.exc_type) == (F, "cuda-oom", "torch.OutOfMemoryError")


def test_implicit_context_is_followed():
    def go():
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            raise ValueError("could not fetch shard 7")  # noqa: B904 - the point of the test

    assert classify(_raised(go)).rule == "connection-dropped"


def test_raise_from_none_hides_the_context():
    def go():
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            raise ValueError("bad shard") from None

    assert classify(_raised(go)).rule == "unclassified"


def test_oom_beats_a_timeout_raised_while_handling_it():
    # Cleanup after an OOM hit a barrier that timed out: the OOM is the cause; retrying would OOM.
    def go():
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        except RuntimeError:
            raise TimeoutError("barrier timed out")  # noqa: B904

    exc = _raised(go)
    assert [type(e).__name__ for e in exception_chain(exc)] == ["TimeoutError", "OutOfMemoryError"]
    assert classify(exc).rule == "cuda-oom"


def test_exception_group_members_are_searched():
    group = ExceptionGroup("ranks failed", [ConnectionResetError("reset"), RuntimeError("Xid 79")])
    assert classify(group).rule == "gpu-xid"


def test_cyclic_chain_terminates():
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert classify(a).rule == "unclassified"


# --------------------------------------------------------------------------- extending


def test_user_rule_first_takes_precedence_over_builtin():
    clf = Classifier()
    xid13 = RuntimeError("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Engine Exception")
    assert clf.classify(xid13).rule == "gpu-xid"
    clf.add(Rule("xid-13-is-software", T, "Xid 13 (software)", pattern=r"Xid \(.*\): 13,"))
    f = clf.classify(xid13)
    assert (f.kind, f.rule) == (T, "xid-13-is-software")
    assert clf.classify(RuntimeError("Xid (PCI:0000:3b:00): 79,")).rule == "gpu-xid"


def test_user_rule_last_does_not_override_builtin():
    clf = Classifier()
    clf.add(Rule("all-runtime-transient", T, "x", types=RuntimeError), first=False)
    assert clf.classify(RuntimeError("Xid 79")).rule == "gpu-xid"
    assert clf.classify(RuntimeError("flaky")).rule == "all-runtime-transient"


def test_rule_by_qualified_name_and_regex_together():
    clf = Classifier([])
    clf.add(
        Rule(
            "oom-large-alloc",
            C,
            "shared GPU full",
            types="torch.cuda.OutOfMemoryError",
            pattern=r"Tried to allocate \d+\.\d+ GiB",
        )
    )
    assert clf.classify(torch.cuda.OutOfMemoryError("Tried to allocate 2.00 GiB")).rule == "oom-large-alloc"
    assert clf.classify(torch.cuda.OutOfMemoryError("Tried to allocate 20 MiB")).rule == "unclassified"
    assert clf.classify(RuntimeError("Tried to allocate 2.00 GiB")).rule == "unclassified"


@pytest.mark.parametrize("name", ["ValueError", "builtins.ValueError", "builtins.Exception"])
def test_builtin_types_by_name(name):
    clf = Classifier([Rule("r", T, "x", types=name)])
    assert clf.classify(ValueError("v")).rule == "r"


def test_duplicate_names_remove_and_replace():
    clf = Classifier([])
    clf.add(Rule("mine", T, "one", types=ValueError))
    with pytest.raises(PolicyError, match="'mine' exists already"):
        clf.add(Rule("mine", C, "two", types=ValueError))
    clf.add(Rule("mine", C, "two", types=ValueError), replace=True)
    assert [r.reason for r in clf.rules] == ["two"]
    clf.remove("mine")
    assert clf.rules == ()
    with pytest.raises(PolicyError, match="no rule named"):
        clf.remove("mine")


def test_register_rule_changes_the_default_classifier():
    class DatasetServerBusy(Exception):
        pass

    assert classify(DatasetServerBusy("busy")).kind is F
    register_rule(Rule("dataset-server-busy", C, "dataset server busy", types=DatasetServerBusy))
    try:
        assert default_classifier.rules[0].name == "dataset-server-busy"
        f = classify(DatasetServerBusy("busy"))
        assert (f.kind, f.rule, f.reason) == (C, "dataset-server-busy", "dataset server busy")
    finally:
        default_classifier.remove("dataset-server-busy")
    assert classify(DatasetServerBusy("busy")).kind is F


def test_explicit_kind_on_the_exception_is_respected():
    class ShardMissing(Exception):
        interlock_failure_kind = FailureKind.CONTENTION

    class Flaky(Exception):
        interlock_failure_kind = "transient"

    class Confused(Exception):
        interlock_failure_kind = "SOMETIMES"

    f = classify(ShardMissing("shard 3 not yet written"))
    assert (f.kind, f.rule) == (C, "explicit")
    assert f.reason.endswith("ShardMissing declares CONTENTION")
    assert classify(Flaky()).kind is T
    # An invalid declaration is ignored, not raised while handling a failure.
    assert classify(Confused("ConnectionResetError")).rule == "unclassified"
    # Explicit beats the table, also when it sits on the cause.
    def go():
        try:
            raise ShardMissing("x")
        except ShardMissing as exc:
            raise RuntimeError("Xid 79") from exc

    assert classify(_raised(go)).kind is C


def test_faulty_predicate_and_unprintable_exception_do_not_break_classification():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    def boom(exc):
        raise AttributeError("predicate bug")

    clf = Classifier([Rule("bad-predicate", T, "x", when=boom), *DEFAULT_RULES])
    f = clf.classify(Unprintable())
    assert f.rule == "unclassified"
    assert "unprintable" in f.message


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "", "kind": T, "reason": "r", "types": ValueError}, "name=''"),
        ({"name": "n", "kind": "SOMETIMES", "reason": "r", "types": ValueError}, "'SOMETIMES' is not a failure kind"),
        ({"name": "n", "kind": T, "reason": "", "types": ValueError}, "reason=''"),
        ({"name": "n", "kind": T, "reason": "r"}, "matches everything"),
        ({"name": "n", "kind": T, "reason": "r", "pattern": "(unclosed"}, "is not a regex"),
        ({"name": "n", "kind": T, "reason": "r", "types": (int,)}, "must be an exception class"),
        ({"name": "n", "kind": T, "reason": "r", "when": 3}, "must be callable"),
    ],
)
def test_invalid_rules_raise_policy_error(kwargs, match):
    with pytest.raises(PolicyError, match=match):
        Rule(**kwargs)


def test_rule_names_in_default_table_are_unique():
    names = [r.name for r in DEFAULT_RULES]
    assert len(names) == len(set(names))


# --------------------------------------------------------------------------- Failure data


def test_failure_json_round_trip():
    f = classify(torch.distributed.DistBackendError(WATCHDOG))
    data = json.loads(json.dumps(f.to_dict()))
    assert data["kind"] == "TRANSIENT"
    assert Failure.from_dict(data) == f
    # Machine-written data from a newer version still replays; missing essentials do not.
    assert Failure.from_dict({**data, "severity": 3}) == f
    with pytest.raises(PolicyError, match="needs at least kind and reason"):
        Failure.from_dict({"reason": "x"})
    with pytest.raises(PolicyError, match="not a failure kind"):
        Failure.from_dict({**data, "kind": "SOMETIMES"})


def test_message_is_truncated_and_credentials_redacted():
    f = classify(ConnectionResetError("reset talking to https://alice:s3cr3t@minio.local/bucket " + "x" * 5000))
    assert "s3cr3t" not in f.message and "https://***@minio.local" in f.message
    assert len(f.message) < 1100 and f.message.endswith("more chars]")


def test_classify_rejects_non_exceptions():
    with pytest.raises(TypeError):
        classify("CUDA out of memory")  # type: ignore[arg-type]


def test_core_modules_import_no_heavy_dependency():
    code = (
        "import sys, interlock.core.failure.rules, interlock.core.model.retry, interlock.core.base.durations; "
        "print(sorted(m for m in ('torch', 'botocore', 'boto3', 'flytekit', 'kfp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
