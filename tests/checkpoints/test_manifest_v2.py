"""Manifest format version 2 (issue 12): each file's digest names its algorithm, xxh3_128
by default; version 1 checkpoints (sha256) written by an older interlock still list, load
and verify, and a corrupt one is refused naming the checkpoint, the file and what differed.

The version 1 checkpoints are real ones: ``v1_store/`` was written by interlock before
version 2 (see its README), not re-created here with today's code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from checkpoints import contract
from checkpoints.test_s3_store import admin, bucket, s3  # noqa: F401 - fixtures

from interlock.core.base.errors import CheckpointError
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.local import LocalCheckpointStore
from interlock.core.checkpoint.manifest import decode_manifest

KEY = contract.KEY
V1_STORE = Path(__file__).parent / "v1_store"
V1_FILES = {  # what the v1 checkpoints hold, by id
    "000000000001": {"state.bin": contract.payload(1, 5000)},
    "000000000002": {"model/w.bin": contract.payload(2, 70000), "opt.bin": contract.payload(3, 100)},
}


@pytest.fixture
def v1_root(tmp_path: Path) -> Path:
    root = tmp_path / "v1"
    shutil.copytree(V1_STORE, root, ignore=shutil.ignore_patterns("README.md"))
    return root


def _v1_dir(root: Path, cid: str) -> Path:
    return LocalCheckpointStore(root).checkpoint_dir(KEY, cid)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


# --- version 1, local -------------------------------------------------------------------


def test_the_v1_fixture_is_version_1_with_sha256() -> None:
    doc = json.loads((_v1_dir(V1_STORE, "000000000002") / "manifest.json").read_bytes())
    assert doc["version"] == 1
    assert doc["files"]["opt.bin"] == {"sha256": contract.sha(contract.payload(3, 100)), "size": 100}


def test_v1_checkpoints_list_and_load_verified(v1_root: Path) -> None:
    store = LocalCheckpointStore(v1_root)
    infos = store.list(KEY)
    assert [(i.id, i.step) for i in infos] == [("000000000001", 1), ("000000000002", 2)]
    for info in infos:
        assert {n: (e.digest, e.size) for n, e in info.files.items()} == {
            n: ("sha256:" + contract.sha(b), len(b)) for n, b in V1_FILES[info.id].items()
        }
    loaded = store.load_latest(KEY)  # verifies every file before it returns
    assert loaded is not None and loaded.verified
    assert {n: loaded.read_bytes(n) for n in loaded.names} == V1_FILES["000000000002"]

    out = Checkpointer(store, KEY).load(v1_root.parent / "restored")  # one pass, hashed on the way
    assert (out / "model" / "w.bin").read_bytes() == contract.payload(2, 70000)
    assert (out / "opt.bin").read_bytes() == contract.payload(3, 100)
    assert (out / "empty").is_dir()
    with Checkpointer(store, KEY).open_read("model/w.bin") as f:
        f.seek(-10, os.SEEK_END)
        assert f.read() == contract.payload(2, 70000)[-10:]

    shutil.rmtree(_v1_dir(v1_root, "000000000002"))
    assert Checkpointer(store, KEY).load() == contract.payload(1, 5000)  # a v1 bytes checkpoint


def test_a_corrupt_v1_checkpoint_is_refused_naming_file_and_sha256(v1_root: Path) -> None:
    store = LocalCheckpointStore(v1_root)
    _flip(_v1_dir(v1_root, "000000000002") / "data" / "model" / "w.bin", 69_999)
    expected = contract.sha(contract.payload(2, 70000))
    what = rf"checkpoint 000000000002 of key '{KEY}': file 'model/w.bin' does not match its manifest \(sha256 expected {expected}, got [0-9a-f]{{64}}\)"
    with pytest.raises(CheckpointError, match=what):
        store.load_latest(KEY)
    with pytest.raises(CheckpointError, match=what):
        Checkpointer(store, KEY).load(v1_root.parent / "restored")
    assert not any((v1_root.parent / "restored").iterdir())  # nothing of it left behind
    handed: list[bytes] = []
    with pytest.raises(CheckpointError, match=what), \
            Checkpointer(store, KEY).open_read("model/w.bin", seekable=False) as f:
        while chunk := f.read(4096):
            handed.append(chunk)
    assert sum(map(len, handed)) < 70000  # the final bytes were never handed out
    # fallback=True skips it for the older v1 checkpoint, which verifies.
    assert Checkpointer(store, KEY, fallback=True).load() == contract.payload(1, 5000)


def test_new_saves_beside_v1_checkpoints_write_v2_and_prune_them(v1_root: Path) -> None:
    store = LocalCheckpointStore(v1_root)
    ck = Checkpointer(store, KEY, keep=2)
    info = ck.save(b"new state", step=3)
    ck.flush()
    assert info.id == "000000000003"  # above the v1 ids
    assert info.files["state.bin"].digest == contract.digest(b"new state")
    doc = json.loads((store.checkpoint_dir(KEY, info.id) / "manifest.json").read_bytes())
    assert doc["version"] == 2 and doc["files"]["state.bin"]["digest"].startswith("xxh3_128:")
    assert [i.id for i in store.list(KEY)] == ["000000000002", "000000000003"]  # oldest v1 pruned
    assert ck.load() == b"new state"
    _flip(store.checkpoint_dir(KEY, info.id) / "data" / "state.bin", 0)
    with pytest.raises(CheckpointError, match=r"file 'state.bin' does not match its manifest \(xxh3_128 expected"):
        ck.load()
    restored = Checkpointer(store, KEY, fallback=True).load(v1_root.parent / "r")  # back to the v1 one
    assert (restored / "opt.bin").read_bytes() == contract.payload(3, 100)


# --- version 1, from S3 -----------------------------------------------------------------


def _upload_v1(store, v1_root: Path) -> None:
    from interlock.plugins.s3.layout import KeyLayout

    layout = KeyLayout(store.prefix, KEY)
    for cid in V1_FILES:
        cdir = _v1_dir(v1_root, cid)
        for path in sorted(p for p in cdir.rglob("*") if p.is_file()):
            rel = path.relative_to(cdir).as_posix()
            object_key = layout.manifest(cid) if rel == "manifest.json" else layout.data(cid, rel[len("data/") :])
            store.client.put_object(Bucket=store.bucket, Key=object_key, Body=path.read_bytes())


def test_v1_checkpoints_load_and_verify_from_s3(s3: str, bucket: str, v1_root: Path) -> None:  # noqa: F811
    from interlock.plugins.s3 import S3CheckpointStore

    store = S3CheckpointStore(bucket, "ckpts", endpoint_url=s3)
    _upload_v1(store, v1_root)
    assert [i.id for i in store.list(KEY)] == ["000000000001", "000000000002"]
    loaded = store.load_latest(KEY)
    assert loaded is not None and {n: loaded.read_bytes(n) for n in loaded.names} == V1_FILES["000000000002"]
    out = Checkpointer(store, KEY).load(v1_root.parent / "restored")
    assert (out / "model" / "w.bin").read_bytes() == contract.payload(2, 70000)
    # A new save writes version 2 beside them.
    info = Checkpointer(store, KEY, keep=None).save(b"s3 state", step=3)
    assert info.files["state.bin"].digest == contract.digest(b"s3 state")
    assert Checkpointer(store, KEY).load() == b"s3 state"


def test_a_corrupt_v1_checkpoint_from_s3_is_refused(s3: str, bucket: str, v1_root: Path) -> None:  # noqa: F811
    from interlock.plugins.s3 import S3CheckpointStore

    store = S3CheckpointStore(bucket, "ckpts", endpoint_url=s3)
    _flip(_v1_dir(v1_root, "000000000002") / "data" / "opt.bin", 3)
    _upload_v1(store, v1_root)
    with pytest.raises(CheckpointError, match=r"000000000002 .*file 'opt.bin' does not match its manifest \(sha256 expected"):
        Checkpointer(store, KEY).load()
    with pytest.raises(CheckpointError, match=r"'opt.bin'.*sha256 expected"), \
            Checkpointer(store, KEY).open_read("opt.bin", seekable=False) as f:
        f.read()
    assert Checkpointer(store, KEY, fallback=True).load() == contract.payload(1, 5000)  # the older v1 one


# --- version 2: what a manifest may say ----------------------------------------------------


def _signed(body: dict) -> bytes:
    """A manifest whose own checksum is right, whatever its body says (computed here)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return json.dumps({**body, "manifest_sha256": hashlib.sha256(canonical).hexdigest()}).encode()


def _body(version: int, entry: dict) -> dict:
    return {
        "format": "interlock.checkpoint", "version": version, "key": KEY, "id": "000000000001",
        "step": None, "created_at": 1.0, "files": {"f.bin": entry}, "metadata": {},
    }


@pytest.mark.parametrize(
    ("version", "entry", "error"),
    [
        (2, {"digest": "md5:" + "0" * 32, "size": 1}, r"file 'f.bin': bad digest 'md5:0+'"),
        (2, {"digest": "xxh3_128:" + "0" * 31, "size": 1}, "bad digest"),
        (2, {"digest": "xxh3_128:" + "G" * 32, "size": 1}, "bad digest"),
        (2, {"digest": "0" * 32, "size": 1}, "bad digest"),
        (2, {"sha256": "0" * 64, "size": 1}, "'digest'"),  # a v1 entry in a v2 manifest
        (1, {"digest": "sha256:" + "0" * 64, "size": 1}, "'sha256'"),  # and the reverse
        (1, {"sha256": "0" * 63, "size": 1}, "bad digest"),
        (2, {"digest": "xxh3_128:" + "0" * 32, "size": -1}, "bad size"),
        (2, {"digest": "xxh3_128:" + "0" * 32, "size": True}, "bad size"),
        (3, {"digest": "xxh3_128:" + "0" * 32, "size": 1}, "version 3 .*reads 'interlock.checkpoint' versions 1, 2"),
        (True, {"sha256": "0" * 64, "size": 1}, "version True"),
    ],
)
def test_a_manifest_with_a_bad_digest_entry_is_refused(version: object, entry: dict, error: str) -> None:
    data = _signed(_body(version, entry))
    with pytest.raises(CheckpointError, match=f"checkpoint 000000000001 of key .*invalid manifest: .*{error}"):
        decode_manifest(data, key=KEY, checkpoint_id="000000000001")


@pytest.mark.parametrize(
    ("version", "entry", "digest"),
    [
        (2, {"digest": "xxh3_128:" + "ab" * 16, "size": 5}, "xxh3_128:" + "ab" * 16),
        (2, {"digest": "sha256:" + "cd" * 32, "size": 5}, "sha256:" + "cd" * 32),
        (1, {"sha256": "ef" * 32, "size": 5}, "sha256:" + "ef" * 32),
    ],
)
def test_what_a_manifest_entry_reads_as(version: int, entry: dict, digest: str) -> None:
    info = decode_manifest(_signed(_body(version, entry)), key=KEY, checkpoint_id="000000000001")
    assert (info.files["f.bin"].digest, info.files["f.bin"].size) == (digest, 5)
    assert info.files["f.bin"].algorithm == digest.split(":")[0]


# --- sha256, opted in -------------------------------------------------------------------------


def test_a_store_may_opt_in_to_sha256(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path / "s", digest="sha256")
    ck = Checkpointer(store, KEY, keep=None)
    content = os.urandom(9 << 20)  # over one I/O chunk
    info = ck.save(content, step=1)
    assert info.files["state.bin"].digest == "sha256:" + contract.sha(content)
    doc = json.loads((store.checkpoint_dir(KEY, info.id) / "manifest.json").read_bytes())
    assert doc["version"] == 2 and doc["files"]["state.bin"]["digest"] == "sha256:" + contract.sha(content)
    with ck.open_write("model.pt", step=2) as f:
        f.write(content)
        f.write(b"tail")
    assert ck.latest is not None and ck.latest.files["model.pt"].digest == "sha256:" + contract.sha(content + b"tail")
    with ck.open_read() as f:
        assert f.read() == content + b"tail"
    # Any store reads it: the manifest says which algorithm to check with.
    assert LocalCheckpointStore(tmp_path / "s").load_latest(KEY) is not None
    _flip(store.checkpoint_dir(KEY, ck.latest.id) / "data" / "model.pt", 5)
    with pytest.raises(CheckpointError, match=r"file 'model.pt' does not match its manifest \(sha256 expected"):
        ck.load(tmp_path / "out")


def test_an_unknown_digest_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"unknown checkpoint digest 'md5'; known: xxh3_128, sha256"):
        LocalCheckpointStore(tmp_path / "s", digest="md5")
    assert not (tmp_path / "s").exists()


def test_the_documented_manifest_is_what_a_save_writes(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md").read_text()
    block = doc.split("### Digests and the manifest", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    shown = json.loads(block)
    store = LocalCheckpointStore(tmp_path / "s")
    info = store.save(KEY, {"state.bin": b"abc"}, metadata={"interlock.kind": "bytes"})
    written = json.loads((store.checkpoint_dir(KEY, info.id) / "manifest.json").read_bytes())
    assert sorted(shown) == sorted(written)
    assert shown["version"] == written["version"] == 2
    assert shown["files"]["state.bin"] == written["files"]["state.bin"] == {
        "digest": contract.digest(b"abc"), "size": 3,
    }


def test_a_store_cannot_commit_a_digest_no_load_could_check() -> None:
    from interlock.core.checkpoint.manifest import CheckpointInfo, FileEntry, encode_manifest

    info = CheckpointInfo(
        key=KEY, id="000000000001", step=None, created_at=1.0, metadata={},
        files={"f.bin": FileEntry(digest="0" * 64, size=1)},  # a bare sha256, as v1 had it
    )
    with pytest.raises(CheckpointError, match=r"file 'f.bin': bad digest '0+' \(expected one of xxh3_128:<32 hex digits>"):
        encode_manifest(info)
