"""S3CheckpointStore against a real S3-speaking server: moto in server mode on loopback.

boto3 talks HTTP to the server exactly as it would to AWS or MinIO. The shared store
contract runs unchanged, then the S3 specifics: objects without a manifest, missing and
flipped data objects, prune order, concurrent writers, multipart uploads, error mapping
(a loopback server that answers 503 SlowDown stands in for a throttling S3), credentials
kept out of messages, and an il.run whose step resumes from an S3 checkpoint on a retry.
"""

from __future__ import annotations

import gc
import http.server
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from checkpoints import contract
from doc_blocks import first_block_after

import interlock as il
from interlock.core.base.errors import CheckpointError
from interlock.core.base.status import FailureKind
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.manifest import CheckpointInfo
from interlock.core.checkpoint.store import CheckpointStore
from interlock.core.failure.rules import classify
from interlock.plugins.s3 import KeyLayout, S3CheckpointStore, S3StoreError, parse_s3_uri

KEY = contract.KEY
payload = contract.payload

SECRET = "interlock-test-secret-never-shown"
KEY_ID = "interlock-test-key-id"
MiB = 1 << 20


# --- the server and the environment -----------------------------------------------------


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Dummy credentials for this test only; no ~/.aws, no instance metadata lookups."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "INTERLOCK_S3_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return moto_endpoint


@pytest.fixture(scope="session")
def admin(moto_endpoint: str):
    """One client for creating buckets (clients are slow to make), credentials explicit."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="admin",
        aws_secret_access_key="admin",  # noqa: S106 - a dummy for the local server
    )


def make_bucket(admin, name: str | None = None) -> str:
    name = name or f"il-{uuid.uuid4().hex[:16]}"
    try:
        admin.create_bucket(Bucket=name)
    except admin.exceptions.BucketAlreadyOwnedByYou:
        pass
    return name


@pytest.fixture
def bucket(s3: str, admin) -> str:
    return make_bucket(admin)


def keys_under(store: S3CheckpointStore, prefix: str = "") -> list[str]:
    pages = store.client.get_paginator("list_objects_v2").paginate(
        Bucket=store.bucket, Prefix=prefix
    )
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def ids_present(store: S3CheckpointStore, key: str) -> dict[str, list[str]]:
    """Every id with objects under it (committed or not) -> the object names below the id."""
    root = KeyLayout(store.prefix, key).root
    out: dict[str, list[str]] = {}
    for k in keys_under(store, root):
        cid, _, rest = k[len(root) :].partition("/")
        out.setdefault(cid, []).append(rest)
    return out


def put(store: S3CheckpointStore, object_key: str, body: bytes) -> None:
    store.client.put_object(Bucket=store.bucket, Key=object_key, Body=body)


def get(store: S3CheckpointStore, object_key: str) -> bytes:
    return store.client.get_object(Bucket=store.bucket, Key=object_key)["Body"].read()


# --- the shared contract ----------------------------------------------------------------


class TestS3CheckpointStoreContract(contract.CheckpointStoreContract):
    # stale_after=0: the contract expects a killed writer's leftovers to be gone after the
    # next save. S3 has no lock to prove a writer dead, so the store only deletes
    # leftovers idle for stale_after; with one writer per test, 0 is exact. The default
    # (young leftovers kept) is tested below.
    @pytest.fixture
    def store(self, s3: str, bucket: str) -> CheckpointStore:
        return S3CheckpointStore(bucket, "ckpts/team-a", endpoint_url=s3, stale_after=0)

    def reopen(self, store: CheckpointStore) -> CheckpointStore:
        assert isinstance(store, S3CheckpointStore)
        return S3CheckpointStore(
            store.bucket, store.prefix, endpoint_url=store.endpoint_url, stale_after=0
        )

    # Fewer, smaller rounds of the reader-racing-save-and-prune test: each is many requests.
    race_rounds = 6
    race_files = 4
    race_file_size = 2_000

    def leave_uncommitted(self, store, key, checkpoint_id, files) -> None:
        layout = KeyLayout(store.prefix, key)
        for name, content in files.items():
            put(store, layout.data(checkpoint_id, name), content)

    def leave_torn_write(self, store, key) -> None:
        # A writer killed mid-upload: its claim and part of its files, no manifest.
        present = [int(i) for i in ids_present(store, key)]
        cid = f"{max(present, default=0) + 1:012d}"
        layout = KeyLayout(store.prefix, key)
        put(store, layout.claim(cid), json.dumps({"token": "dead-writer"}).encode())
        put(store, layout.data(cid, "s"), payload(99)[:100])

    def leftovers(self, store, key) -> list[str]:
        return sorted(cid for cid, rest in ids_present(store, key).items() if "manifest.json" not in rest)

    def flip_byte(self, store, info: CheckpointInfo, name: str, offset: int) -> None:
        object_key = KeyLayout(store.prefix, info.key).data(info.id, name)
        data = bytearray(get(store, object_key))
        data[offset] ^= 0x01
        put(store, object_key, bytes(data))

    def corrupt_manifest(self, store, info: CheckpointInfo) -> None:
        object_key = KeyLayout(store.prefix, info.key).manifest(info.id)
        doc = json.loads(get(store, object_key))
        doc["step"] = (doc["step"] or 0) + 1
        put(store, object_key, json.dumps(doc).encode())


# --- S3 specifics ------------------------------------------------------------------------


def test_object_layout_and_manifest(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, "/ckpts/", endpoint_url=s3)
    info = store.save(KEY, {"a/b.bin": b"xyz", "c.bin": b""}, step=3, metadata={"m": 1})
    root = "ckpts/fraud-retrain/run-1/train/@ckpt/"
    assert KeyLayout("ckpts", KEY).root == root
    assert keys_under(store) == [
        f"{root}000000000001/claim",  # the writer's claim on the id: pid, time, token
        f"{root}000000000001/data/a/b.bin",
        f"{root}000000000001/data/c.bin",
        f"{root}000000000001/manifest.json",
    ]
    assert get(store, f"{root}000000000001/data/a/b.bin") == b"xyz"
    doc = json.loads(get(store, f"{root}000000000001/manifest.json"))
    assert doc["format"] == "interlock.checkpoint" and doc["key"] == KEY and doc["id"] == info.id
    assert doc["version"] == 2 and doc["files"]["a/b.bin"] == {"digest": contract.digest(b"xyz"), "size": 3}
    assert doc["step"] == 3 and doc["metadata"] == {"m": 1}
    # Key segments are encoded one by one: "@ckpt" can never be a key segment.
    assert KeyLayout("", "a b/@ckpt/x").root == "a%20b/%40ckpt/x/@ckpt/"
    assert repr(store) == f"S3CheckpointStore('s3://{bucket}/ckpts', endpoint_url='{s3}')"


def test_young_data_without_manifest_is_ignored_kept_then_cleaned(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, "p", endpoint_url=s3)  # default stale_after: hours
    layout = KeyLayout("p", KEY)
    good = store.save(KEY, {"s": payload(1)}, step=1)
    # A live writer (or one killed a moment ago) has id 2: its claim and a data object.
    put(store, layout.claim("000000000002"), b'{"token": "other-writer"}')
    put(store, layout.data("000000000002", "s"), payload(2))
    # Data of id 3 without claim or manifest.
    put(store, layout.data("000000000003", "s"), payload(3))
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.info == good and loaded.read_bytes("s") == payload(1)
    assert store.list(KEY) == [good]
    new = store.save(KEY, {"s": payload(4)}, step=4)
    assert new.id == "000000000004"  # above every id present, committed or not
    assert store.prune(KEY, keep=1) == [good]
    # Young leftovers survive save and prune: they may belong to a live writer.
    assert sorted(ids_present(store, KEY)) == ["000000000002", "000000000003", new.id]
    assert get(store, layout.claim("000000000002")) == b'{"token": "other-writer"}'
    assert store.cleanup(KEY) == []
    # Once nothing can be writing (or after stale_after), cleanup removes them.
    assert store.cleanup(KEY, older_than=0) == ["000000000002", "000000000003"]
    assert sorted(ids_present(store, KEY)) == [new.id]
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.info == new


def test_manifest_pointing_at_a_missing_data_object_is_refused(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    old = store.save(KEY, {"s": payload(1)}, step=1)
    new = store.save(KEY, {"s": payload(2), "t": payload(3)}, step=2)
    store.client.delete_object(Bucket=bucket, Key=KeyLayout("", KEY).data(new.id, "t"))
    with pytest.raises(CheckpointError) as err:
        store.load_latest(KEY)
    msg = str(err.value)
    assert KEY in msg and new.id in msg and "'t'" in msg and "file is missing" in msg
    assert not isinstance(err.value, S3StoreError)  # corruption, not a service failure
    loaded = store.load_latest(KEY, fallback=True)
    assert loaded is not None and loaded.info == old and loaded.read_bytes("s") == payload(1)


def test_truncated_and_replaced_objects_are_refused(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    info = store.save(KEY, {"s": payload(1, 1000)})
    object_key = KeyLayout("", KEY).data(info.id, "s")
    put(store, object_key, payload(1, 999))
    with pytest.raises(CheckpointError, match="size expected 1000, got 999"):
        store.load_latest(KEY)
    put(store, object_key, payload(1, 1000) + b"!")
    with pytest.raises(CheckpointError, match="longer than 1000 bytes"):
        store.load_latest(KEY)
    put(store, object_key, payload(2, 1000))  # same size, other content
    with pytest.raises(CheckpointError, match=f"checkpoint {info.id} of key .*'s'.*xxh3_128 expected"):
        store.load_latest(KEY)


def test_a_manifest_copied_to_another_id_is_refused(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    layout = KeyLayout("", KEY)
    a = store.save(KEY, {"s": payload(1)})
    b = store.save(KEY, {"s": payload(2)})
    put(store, layout.manifest(b.id), get(store, layout.manifest(a.id)))
    with pytest.raises(CheckpointError, match=f"checkpoint {b.id} of key .*manifest names"):
        store.load_latest(KEY)


def test_prune_deletes_the_manifest_before_the_data(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    layout = KeyLayout("", KEY)
    infos = [store.save(KEY, {"a": payload(i), "b/c": payload(i + 10)}, step=i) for i in range(3)]
    deletes: list[list[str]] = []

    def record(params, **_kw) -> None:  # botocore's own event hook: the real requests go out
        if "Key" in params:
            deletes.append([params["Key"]])
        else:
            deletes.append([o["Key"] for o in params["Delete"]["Objects"]])

    store.client.meta.events.register("provide-client-params.s3.DeleteObject", record)
    store.client.meta.events.register("provide-client-params.s3.DeleteObjects", record)
    assert store.prune(KEY, keep=1) == infos[:2]
    flat = [k for batch in deletes for k in batch]
    manifests = {layout.manifest(i.id) for i in infos[:2]}
    assert set(deletes[0]) == manifests  # the manifests go first, alone...
    data = {layout.data(i.id, n) for i in infos[:2] for n in ("a", "b/c")}
    assert data <= set(flat) and not data & set(deletes[0])  # ...then the data
    assert sorted(ids_present(store, KEY)) == [infos[2].id]
    assert [i.id for i in store.list(KEY)] == [infos[2].id]


def test_concurrent_writers_get_distinct_ids(s3: str, bucket: str) -> None:
    errors: list[BaseException] = []
    saved: list[CheckpointInfo] = []

    def write(n: int) -> None:
        try:
            store = S3CheckpointStore(bucket, "conc", endpoint_url=s3)  # one client per writer
            for i in range(3):
                saved.append(store.save(KEY, {"s": payload(n * 10 + i)}, step=n * 10 + i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = S3CheckpointStore(bucket, "conc", endpoint_url=s3)
    listed = store.list(KEY)
    assert len(listed) == 12 and len({i.id for i in listed}) == 12
    assert sorted(i.id for i in saved) == [i.id for i in listed]
    layout = KeyLayout("conc", KEY)
    for info in listed:
        assert get(store, layout.data(info.id, "s")) == payload(info.step)
    assert store.cleanup(KEY, older_than=0) == []  # no writer left anything behind


def test_concurrent_writers_without_conditional_writes(s3: str, bucket: str) -> None:
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            store = S3CheckpointStore(bucket, "nocond", endpoint_url=s3, conditional_writes=False)
            for i in range(2):
                store.save(KEY, {"s": payload(n * 10 + i)}, step=n * 10 + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = S3CheckpointStore(bucket, "nocond", endpoint_url=s3)
    listed = store.list(KEY)
    assert len(listed) == 6 and len({i.id for i in listed}) == 6
    for info in listed:
        assert get(store, KeyLayout("nocond", KEY).data(info.id, "s")) == payload(info.step)


def test_a_save_whose_claim_is_taken_starts_over_under_a_new_id(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    layout = KeyLayout("", KEY)
    first = layout.claim("000000000001")
    fired: list[str] = []

    def cleaner(params, **_kw) -> None:
        # A cleanup elsewhere took this writer for dead while it uploaded id 1.
        if params["Key"] == layout.data("000000000001", "s") and not fired:
            fired.append(params["Key"])
            store.client.delete_object(Bucket=bucket, Key=first)

    store.client.meta.events.register("provide-client-params.s3.PutObject", cleaner)
    info = store.save(KEY, {"s": payload(1)}, step=1)
    assert fired and info.id == "000000000002"
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.info == info and loaded.read_bytes("s") == payload(1)
    # Id 1 is no longer this writer's to delete: left as debris, ignored, cleaned later.
    assert store.list(KEY) == [info]
    assert store.cleanup(KEY, older_than=0) == ["000000000001"]


def test_conditional_claim_sends_writers_to_the_next_id(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    layout = KeyLayout("", KEY)
    # A claim on id 1 that a listing made a moment earlier would not have seen.
    put(store, layout.claim("000000000001"), b'{"token": "other"}')
    assert store._put_if_absent(layout.claim("000000000001"), b"mine") is False
    assert get(store, layout.claim("000000000001")) == b'{"token": "other"}'
    info = store.save(KEY, {"s": b"1"})
    assert info.id == "000000000002"


def test_without_conditional_writes_saves_still_commit(s3: str, bucket: str) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3, conditional_writes=False)
    infos = [store.save(KEY, {"s": payload(i)}, step=i) for i in range(3)]
    assert [i.id for i in infos] == ["000000000001", "000000000002", "000000000003"]
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.read_bytes("s") == payload(2)


def test_large_files_go_up_in_parts_and_verify(s3: str, bucket: str, tmp_path: Path) -> None:
    store = S3CheckpointStore(
        bucket, endpoint_url=s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB
    )
    big = tmp_path / "big.bin"
    content = os.urandom(6 * MiB + 3)
    big.write_bytes(content)
    info = store.save(KEY, {"w.bin": big, "small": b"x"})
    object_key = KeyLayout("", KEY).data(info.id, "w.bin")
    head = store.client.head_object(Bucket=bucket, Key=object_key)
    assert head["ETag"].strip('"').endswith("-2")  # two parts: 5 MiB + the rest
    assert info.files["w.bin"].digest == contract.digest(content) and info.files["w.bin"].size == len(content)
    loaded = store.load_latest(KEY)
    assert loaded is not None
    out = loaded.copy_to(tmp_path / "out")
    assert (out / "w.bin").read_bytes() == content
    data = bytearray(get(store, object_key))
    data[5 * MiB + 1] ^= 0x80  # in the second part
    put(store, object_key, bytes(data))
    with pytest.raises(CheckpointError, match="w.bin"):
        store.load_latest(KEY)


def _checksums_sent(store: S3CheckpointStore) -> list[tuple[str, str | None]]:
    """(operation, the CRC32 header it carried) for every upload request the store sends."""
    sent: list[tuple[str, str | None]] = []

    def record(request, event_name: str, **_kw) -> None:
        op = event_name.rsplit(".", 1)[-1]
        if op in ("PutObject", "UploadPart"):
            value = request.headers.get("x-amz-checksum-crc32")
            sent.append((op, value.decode() if isinstance(value, bytes) else value))

    store.client.meta.events.register("before-send.s3", record)
    return sent


def test_crc32_on_every_upload_when_asked_as_upload_fileobj_sends_it(
    s3: str, bucket: str, tmp_path: Path
) -> None:
    # boto3's default (what upload_fileobj does): a CRC32 of every object and part, checked
    # by the server on arrival; the end-to-end digest in the manifest stays.
    store = S3CheckpointStore(
        bucket,
        endpoint_url=s3,
        multipart_threshold=5 * MiB,
        multipart_chunksize=5 * MiB,
        request_checksum_calculation="when_supported",
    )
    sent = _checksums_sent(store)
    big = tmp_path / "big.bin"
    content = os.urandom(6 * MiB + 3)
    big.write_bytes(content)  # files: read through the non-seekable hashing reader
    small_file = tmp_path / "small.txt"
    small_file.write_bytes(b"y" * 100)
    info = store.save(KEY, {"w.bin": big, "small": b"x" * 100, "small.txt": small_file})
    assert [op for op, _ in sent].count("UploadPart") == 2
    assert all(value for _, value in sent), sent  # claim, parts, small files, manifest
    layout = KeyLayout("", KEY)
    for name in ("w.bin", "small", "small.txt"):
        head = store.client.head_object(Bucket=bucket, Key=layout.data(info.id, name), ChecksumMode="ENABLED")
        assert head.get("ChecksumCRC32"), name  # stored by the server beside the object
    loaded = store.load_latest(KEY)
    assert loaded is not None and loaded.read_bytes("w.bin") == content

    # With an endpoint and no setting: only where the API requires one (compatibility).
    plain = S3CheckpointStore(bucket, endpoint_url=s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    sent_plain = _checksums_sent(plain)
    plain.save(KEY, {"w.bin": big})
    assert sent_plain and not any(value for _, value in sent_plain), sent_plain
    with pytest.raises(CheckpointError, match="request_checksum_calculation"):
        S3CheckpointStore(bucket, endpoint_url=s3, request_checksum_calculation="always")


def test_botocore_checksum_setting_is_honoured_with_an_endpoint(
    s3: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a user of CheckpointPolicy(store="s3://...") can set without code: botocore's
    # own variable; the store's endpoint default must not override it.
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    store = S3CheckpointStore.from_uri(f"s3://{bucket}/ckpts", endpoint_url=s3)
    sent = _checksums_sent(store)
    Checkpointer(store, KEY).save(b"state" * 1000, step=1)
    assert sent and all(value for _, value in sent), sent


def test_a_load_downloads_each_file_once(s3: str, bucket: str, tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    store = S3CheckpointStore(bucket, endpoint_url=s3, spool_dir=spool_dir)
    files = {"a": payload(1, 50_000), "d/b": payload(2, 70_000)}
    store.save(KEY, files)
    gets: list[str] = []
    store.client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_kw: gets.append(params["Key"])
    )
    loaded = store.load_latest(KEY)  # verifies: streams every file once
    assert loaded is not None
    assert {n: loaded.read_bytes(n) for n in loaded.names} == files
    out = loaded.copy_to(tmp_path / "out")
    assert (out / "d" / "b").read_bytes() == files["d/b"]
    data_gets = [k for k in gets if "/data/" in k]
    assert sorted(data_gets) == sorted(KeyLayout("", KEY).data(loaded.info.id, n) for n in files)
    # Local copies are still checked on every read.
    [copy_dir] = list(spool_dir.iterdir())
    for copy in copy_dir.iterdir():
        copy.write_bytes(b"tampered")
    with pytest.raises(CheckpointError, match="does not match its manifest"):
        loaded.read_bytes("a")
    del loaded
    gc.collect()
    assert list(spool_dir.iterdir()) == []  # gone with the LoadedCheckpoint
    # Without a spool every read downloads again.
    plain = S3CheckpointStore(bucket, endpoint_url=s3, spool=False)
    loaded = plain.load_latest(KEY)
    assert loaded is not None and loaded.read_bytes("a") == files["a"]


def test_many_files_go_up_in_windows(s3: str, bucket: str, tmp_path: Path, monkeypatch) -> None:
    from interlock.plugins.s3 import store as store_module

    monkeypatch.setattr(store_module, "_UPLOAD_WINDOW", 4)  # 11 files: windows of 4, 4, 3
    src = tmp_path / "shards"
    src.mkdir()
    content = {f"shard-{i:02d}.bin": payload(i, 1000 + i) for i in range(11)}
    for name, data in content.items():
        (src / name).write_bytes(data)
    store = S3CheckpointStore(bucket, endpoint_url=s3)
    info = Checkpointer(store, KEY).save(src, step=1)
    assert {n: (e.digest, e.size) for n, e in info.files.items()} == {
        n: (contract.digest(d), len(d)) for n, d in content.items()
    }
    restored = Checkpointer(store, KEY).load(tmp_path / "out")
    assert {p.name: p.read_bytes() for p in restored.iterdir()} == content


def test_failed_save_leaves_nothing_behind(s3: str, bucket: str, tmp_path: Path) -> None:
    store = S3CheckpointStore(bucket, endpoint_url=s3)

    class Boom(Exception):
        pass

    # Fail the second PutObject (the claim is the first) from inside botocore.
    calls = {"n": 0}

    def maybe_explode(**_kw) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Boom("upload interrupted")

    store.client.meta.events.register("before-call.s3.PutObject", maybe_explode)
    with pytest.raises(Boom):
        store.save(KEY, {"a": b"1", "b": b"2", "c": b"3"})
    store.client.meta.events.unregister("before-call.s3.PutObject", maybe_explode)
    assert keys_under(store) == []
    with pytest.raises(CheckpointError, match="missing.bin"):
        store.save(KEY, {"a": b"1", "b": tmp_path / "missing.bin"})
    assert keys_under(store) == [] and store.list(KEY) == []


def test_from_uri_and_endpoint_from_environment(s3: str, bucket: str, monkeypatch) -> None:
    assert parse_s3_uri("s3://my-bucket/a/b/") == ("my-bucket", "a/b")
    assert parse_s3_uri("s3://my-bucket") == ("my-bucket", "")
    for bad in ("my-bucket/x", "s3://", "s3:///x", "file:///tmp", "s3://bad bucket/x"):
        with pytest.raises(CheckpointError):
            parse_s3_uri(bad)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # loses to ours
    monkeypatch.setenv("INTERLOCK_S3_ENDPOINT_URL", s3)
    store = S3CheckpointStore.from_uri(f"s3://{bucket}/team/ckpts")
    assert (store.bucket, store.prefix, store.endpoint_url) == (bucket, "team/ckpts", s3)
    store.save(KEY, {"s": b"1"})
    assert keys_under(store, "team/ckpts/")
    monkeypatch.delenv("INTERLOCK_S3_ENDPOINT_URL")
    assert S3CheckpointStore.from_uri(f"s3://{bucket}").endpoint_url == "http://127.0.0.1:9"
    assert S3CheckpointStore.from_uri(f"s3://{bucket}", endpoint_url=s3).endpoint_url == s3
    # Prefixes isolate stores in one bucket.
    other = S3CheckpointStore(bucket, "team", endpoint_url=s3)
    assert other.list(KEY) == [] and other.load_latest(KEY) is None


def test_endpoint_credentials_never_shown(s3: str) -> None:
    store = S3CheckpointStore("some-bucket", endpoint_url=f"http://user:{SECRET}@127.0.0.1:9")
    assert SECRET not in repr(store) and "127.0.0.1:9" in repr(store)


# --- errors ------------------------------------------------------------------------------


def test_missing_bucket_is_fatal_with_a_hint(s3: str, caplog) -> None:
    store = S3CheckpointStore("no-such-bucket-here", "p", endpoint_url=s3)
    caplog.set_level(logging.DEBUG, logger="interlock")
    with pytest.raises(S3StoreError) as err:
        store.save(KEY, {"s": b"1"})
    e = err.value
    assert isinstance(e, CheckpointError) and e.code == "CHECKPOINT_S3"
    assert e.s3_code == "NoSuchBucket" and e.status == 404 and e.retryable is False
    assert "s3://no-such-bucket-here/p/" in str(e) and "create it" in (e.hint or "")
    assert isinstance(e.__cause__, ClientError)
    assert classify(e).kind is FailureKind.FATAL
    for text in (str(e), repr(e), caplog.text):
        assert SECRET not in text and KEY_ID not in text


def _serve_error(status: int, code: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A loopback HTTP server that answers every request with an S3 error document."""

    class Failing(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>{code} from the test server</Message></Error>"
            ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

        def log_message(self, *args) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize(
    ("status", "code", "retryable", "hint"),
    [
        (503, "SlowDown", True, "throttling"),
        (500, "InternalError", True, "throttling or unavailable"),
        (403, "AccessDenied", False, "s3:PutObject"),
        (403, "InvalidAccessKeyId", False, "credentials"),
    ],
)
def test_service_errors_map_to_retryable_or_fatal(
    s3: str, status: int, code: str, retryable: bool, hint: str
) -> None:
    server, endpoint = _serve_error(status, code)
    try:
        store = S3CheckpointStore("some-bucket", endpoint_url=endpoint, max_attempts=1)
        with pytest.raises(S3StoreError) as err:
            store.save(KEY, {"s": b"1"})
    finally:
        server.shutdown()
        server.server_close()
    e = err.value
    assert (e.s3_code, e.status, e.retryable) == (code, status, retryable)
    assert e.code == "CHECKPOINT_S3" and hint in (e.hint or "")
    assert classify(e).kind is (FailureKind.TRANSIENT if retryable else FailureKind.FATAL)
    assert SECRET not in str(e) and KEY_ID not in str(e)


def test_unreachable_endpoint_is_retryable(s3: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    store = S3CheckpointStore("b-bucket", endpoint_url=f"http://127.0.0.1:{port}", max_attempts=1)
    with pytest.raises(S3StoreError) as err:
        store.list(KEY)
    assert err.value.s3_code == "EndpointConnectionError" and err.value.retryable is True
    assert "INTERLOCK_S3_ENDPOINT_URL" in (err.value.hint or "")
    assert classify(err.value).kind is FailureKind.TRANSIENT


def test_messages_never_carry_key_ids_or_secrets(monkeypatch) -> None:
    from interlock.plugins.s3.errors import redact

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    text = f"denied for AKIAABCDEFGHIJKLMNOP with {SECRET}"
    assert redact(text) == "denied for <redacted> with <redacted>"


# --- end to end: a step resumes from its S3 checkpoint on a retry ------------------------

E2E_BUCKET = "interlock-e2e"
E2E_STORE = f"s3://{E2E_BUCKET}/runs"


@il.step(
    checkpoint=il.CheckpointPolicy(every="1s", keep=2, store=E2E_STORE),
    retry=il.Retry(transient=2),
)
def s3_resumable(epochs: int, crash_at: int, ctx: il.StepContext) -> str:
    """Checkpoints every epoch; the first attempt dies (TRANSIENT) right after a save."""
    state = ctx.checkpoint.load()
    start = state["epoch"] if state else 0
    done = []
    for epoch in range(start, epochs):
        done.append(epoch)
        ctx.checkpoint.save({"epoch": epoch + 1}, step=epoch + 1)
        if ctx.attempt == 1 and epoch + 1 == crash_at:
            raise ConnectionResetError("connection reset by peer")
    return f"attempt={ctx.attempt} start={start} ran={done}"


@il.pipeline(name="s3-resume")
def s3_resume_pipeline(epochs: int = 5, crash_at: int = 3):
    return s3_resumable(epochs=epochs, crash_at=crash_at)


def test_run_resumes_from_the_s3_checkpoint_on_retry(s3: str, admin, tmp_path: Path, monkeypatch) -> None:
    make_bucket(admin, E2E_BUCKET)
    monkeypatch.setenv("INTERLOCK_S3_ENDPOINT_URL", s3)
    result = il.run(s3_resume_pipeline, backend="local", workdir=tmp_path, run_id="r1", epochs=5, crash_at=3)
    assert result.succeeded
    [output] = result.outputs.values()
    assert output == "attempt=2 start=3 ran=[3, 4]"
    [outcome] = result.steps.values()
    assert outcome.attempts == 2
    # The state lived in S3 (keep=2), not in the run directory.
    [node] = result.steps
    store = S3CheckpointStore.from_uri(E2E_STORE)
    assert [i.step for i in store.list(f"s3-resume/r1/{node}")] == [4, 5]
    assert not list(tmp_path.rglob("manifest.json"))
    # A new run has its own key: it starts fresh.
    again = il.run(s3_resume_pipeline, backend="local", workdir=tmp_path, run_id="r2", epochs=2, crash_at=0)
    assert list(again.outputs.values()) == ["attempt=1 start=0 ran=[0, 1]"]


def test_docs_example_resumes_after_a_sigterm_with_an_s3_store(
    s3: str, admin, tmp_path: Path, monkeypatch
) -> None:
    """The runnable example of docs/checkpoints.md, as written, with CHECKPOINT_STORE=s3://."""
    code = first_block_after("docs/checkpoints.md", "## A runnable example")
    script = tmp_path / "resumable_training.py"
    script.write_text(code)
    bucket = make_bucket(admin)
    monkeypatch.setenv("CHECKPOINT_STORE", f"s3://{bucket}/docs")
    monkeypatch.setenv("INTERLOCK_S3_ENDPOINT_URL", s3)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-2:] == ["first run: stopped", "resumed at epoch 3, loss 0.590"]
    assert "stopped by SIGTERM" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    store = S3CheckpointStore(bucket, "docs", endpoint_url=s3)
    [run_key] = {k.split("/@ckpt/")[0] for k in keys_under(store, "docs/")}
    assert run_key.startswith("docs/resumable-training/") and run_key.endswith("/train")
    key = run_key[len("docs/") :]
    assert [i.step for i in store.list(key)] == [3, 5]  # keep=2: the preemption save, the last
    assert not list((tmp_path / "work").rglob("manifest.json"))
