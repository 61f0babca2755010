"""LocalCheckpointStore: the store contract, plus what is specific to a local directory."""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from checkpoints import contract

from interlock.core.base.errors import CheckpointError, SerializationError
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.local import LocalCheckpointStore
from interlock.core.checkpoint.manifest import CheckpointInfo
from interlock.core.checkpoint.store import CheckpointStore

KEY = contract.KEY
payload = contract.payload


class TestLocalCheckpointStoreContract(contract.CheckpointStoreContract):
    def make_store(self, tmp_path: Path) -> CheckpointStore:
        return LocalCheckpointStore(tmp_path / "ckpts", lock_timeout=5)

    def reopen(self, store: CheckpointStore) -> CheckpointStore:
        assert isinstance(store, LocalCheckpointStore)
        return LocalCheckpointStore(store.root)

    def racing_writer(self, store: CheckpointStore) -> CheckpointStore:
        # durable=False: no fsync (the race is about deletion, not durability) keeps it fast.
        assert isinstance(store, LocalCheckpointStore)
        return LocalCheckpointStore(store.root, durable=False)

    def leave_uncommitted(self, store, key, checkpoint_id, files) -> None:
        data = store.checkpoint_dir(key, checkpoint_id) / "data"
        data.mkdir(parents=True)
        for name, content in files.items():
            (data / name).write_bytes(content)

    def leave_torn_write(self, store, key) -> None:
        tmp = store.key_dir(key) / f".tmp-torn{len(os.listdir(store.key_dir(key)))}"
        (tmp / "data").mkdir(parents=True)
        (tmp / "data" / "s").write_bytes(payload(99)[:100])  # half a file, no manifest

    def leftovers(self, store, key) -> list[str]:
        return sorted(n for n in os.listdir(store.key_dir(key)) if n.startswith(".tmp-"))

    def flip_byte(self, store, info: CheckpointInfo, name: str, offset: int) -> None:
        path = store.checkpoint_dir(info.key, info.id) / "data" / name
        with open(path, "r+b") as f:
            f.seek(offset)
            b = f.read(1)
            f.seek(offset)
            f.write(bytes([b[0] ^ 0x01]))

    def corrupt_manifest(self, store, info: CheckpointInfo) -> None:
        path = store.checkpoint_dir(info.key, info.id) / "manifest.json"
        doc = json.loads(path.read_bytes())
        doc["step"] = (doc["step"] or 0) + 1
        path.write_text(json.dumps(doc))


# --- local specifics -------------------------------------------------------------------


def test_on_disk_layout_and_manifest(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    info = store.save(KEY, {"a/b.bin": b"xyz"}, step=3, metadata={"m": 1})
    kdir = tmp_path / "fraud-retrain%2Frun-1%2Ftrain"
    assert store.key_dir(KEY) == kdir
    cdir = kdir / info.id
    assert info.id == "000000000001"
    assert sorted(os.listdir(cdir)) == ["data", "manifest.json"]
    assert (cdir / "data" / "a" / "b.bin").read_bytes() == b"xyz"
    doc = json.loads((cdir / "manifest.json").read_text())
    assert doc["format"] == "interlock.checkpoint" and doc["version"] == 2
    assert doc["key"] == KEY and doc["id"] == info.id and doc["step"] == 3
    assert doc["files"] == {"a/b.bin": {"digest": contract.digest(b"xyz"), "size": 3}}
    assert doc["metadata"] == {"m": 1} and len(doc["manifest_sha256"]) == 64
    # Nothing but the committed checkpoint and the lock file is left behind.
    assert sorted(os.listdir(kdir)) == [".lock", info.id]


def test_a_manifest_moved_to_another_checkpoint_is_refused(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    a = store.save(KEY, {"s": payload(1)})
    b = store.save(KEY, {"s": payload(2)})
    # Manifest of `a` copied over `b`: valid checksum, but it names another id.
    (store.checkpoint_dir(KEY, b.id) / "manifest.json").write_bytes(
        (store.checkpoint_dir(KEY, a.id) / "manifest.json").read_bytes()
    )
    with pytest.raises(CheckpointError, match=f"checkpoint {b.id} of key .*manifest names"):
        store.load_latest(KEY)


def test_missing_data_file_is_refused(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    info = store.save(KEY, {"s": payload(1), "t": payload(2)})
    (store.checkpoint_dir(KEY, info.id) / "data" / "t").unlink()
    with pytest.raises(CheckpointError, match="file 't' does not match its manifest \\(file is missing\\)"):
        store.load_latest(KEY)


def test_truncated_and_extended_files_are_refused(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    info = store.save(KEY, {"s": payload(1, 1000)})
    path = store.checkpoint_dir(KEY, info.id) / "data" / "s"
    path.write_bytes(payload(1, 999))
    with pytest.raises(CheckpointError, match="size expected 1000, got 999"):
        store.load_latest(KEY)
    path.write_bytes(payload(1, 1000) + b"!")
    with pytest.raises(CheckpointError, match="longer than 1000 bytes"):
        store.load_latest(KEY)


def test_uncommitted_id_dirs_are_skipped_by_ids_and_pruned(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    a = store.save(KEY, {"s": payload(1)})
    stray = store.checkpoint_dir(KEY, "000000000002")
    stray.mkdir()
    b = store.save(KEY, {"s": payload(2)})
    assert b.id == "000000000003"  # never renamed onto the stray directory
    c = store.save(KEY, {"s": payload(3)})
    assert store.prune(KEY, keep=2) == [a]
    assert not stray.exists()  # debris older than what is kept goes too
    assert [i.id for i in store.list(KEY)] == [b.id, c.id]


def test_save_waits_for_the_key_lock_and_times_out(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path, lock_timeout=0.3)
    store.save(KEY, {"s": b"1"})
    fd = os.open(store.key_dir(KEY) / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another writer of this key
        start = time.monotonic()
        with pytest.raises(CheckpointError, match="locked by another writer") as err:
            store.save(KEY, {"s": b"2"})
        assert err.value.retryable is True
        assert 0.25 < time.monotonic() - start < 5
        # Reads take no lock.
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.read_bytes("s") == b"1"
    finally:
        os.close(fd)
    assert store.save(KEY, {"s": b"2"}).id == "000000000002"


def test_concurrent_writers_get_distinct_ids(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    saved: list[CheckpointInfo] = []

    def writer(n: int) -> None:
        try:
            store = LocalCheckpointStore(tmp_path)  # one store object per writer
            for i in range(3):
                saved.append(store.save(KEY, {"s": payload(n * 10 + i)}, step=n * 10 + i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = LocalCheckpointStore(tmp_path)
    listed = store.list(KEY)
    assert len(listed) == 12 and len({i.id for i in listed}) == 12
    assert sorted(i.id for i in saved) == [i.id for i in listed]
    for info in listed:
        content = (store.checkpoint_dir(KEY, info.id) / "data" / "s").read_bytes()
        assert content == payload(info.step)


def test_save_fsyncs_data_and_manifest_before_the_commit_rename(tmp_path: Path, monkeypatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(src, dst) -> None:
        events.append(("rename", str(dst)))
        real_rename(src, dst)

    store = LocalCheckpointStore(tmp_path / "s")
    store.save(KEY, {"a.bin": b"1"})  # creates the key directory
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    info = store.save(KEY, {"a.bin": b"1", "sub/b.bin": b"2"})
    monkeypatch.undo()
    kdir = str(store.key_dir(KEY))
    commit = events.index(("rename", f"{kdir}/{info.id}"))
    before = [p.split("/.tmp-", 1)[-1] for kind, p in events[:commit] if kind == "fsync"]
    # Every data file, every data directory, the manifest and the temp dir itself.
    for suffix in ("/data/a.bin", "/data/sub/b.bin", "/data", "/data/sub", "/manifest.json"):
        assert any(p.endswith(suffix) for p in before), (suffix, before)
    assert any("/" not in p for p in before), "the temp directory itself is fsynced"
    assert ("fsync", kdir) in events[commit + 1 :], "the key directory is fsynced after the rename"

    events.clear()
    monkeypatch.setattr(os, "fsync", fsync)
    LocalCheckpointStore(tmp_path / "s", durable=False).save(KEY, {"a.bin": b"3"})
    monkeypatch.undo()
    assert [e for e in events if e[0] == "fsync"] == []


def test_streamed_and_many_file_saves_fsync_everything_before_the_rename_together(
    tmp_path: Path, monkeypatch
) -> None:
    # The commit fsyncs the files, directories, manifest and temp dir at once (one journal
    # commit instead of one each), the files of a large save in batches (bounded fds).
    from interlock.core.checkpoint import local as checkpoint_local

    events: list[tuple[str, str, int, int]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"), threading.get_ident(), len(os.listdir("/proc/self/fd"))))
        real_fsync(fd)

    def rename(src, dst) -> None:
        events.append(("rename", str(dst), 0, 0))
        real_rename(src, dst)

    store = LocalCheckpointStore(tmp_path / "s")
    ck = Checkpointer(store, KEY, keep=None)
    store.save(KEY, {"a.bin": b"1"})  # creates the key directory
    baseline_fds = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    with ck.writer(step=2) as w:
        for name in ("model/0.pt", "model/1.pt", "optim.pt"):
            with w.open(name) as f:
                f.write(name.encode() * 1000)
    many = {f"shard/{i:03d}.bin": payload(i, 100) for i in range(checkpoint_local._SYNC_BATCH + 8)}
    info3 = store.save(KEY, many, step=3)
    monkeypatch.undo()
    kdir = str(store.key_dir(KEY))
    for cid, names in (("000000000002", ["model/0.pt", "model/1.pt", "optim.pt"]), (info3.id, list(many))):
        commit = events.index(("rename", f"{kdir}/{cid}", 0, 0))
        start = max((i for i, e in enumerate(events[:commit]) if e[0] == "rename"), default=-1) + 1
        before = [e for e in events[start:commit] if e[0] == "fsync"]
        synced = {p.split("/.tmp-", 1)[-1].split("/", 1)[-1] for _, p, _, _ in before}
        for name in names:
            assert f"data/{name}" in synced, (name, sorted(synced))
        assert {"data", "manifest.json"} <= synced
        assert len({tid for _, _, tid, _ in before}) > 1, "the commit's fsyncs run at once"
        assert ("fsync", kdir) in [e[:2] for e in events[commit + 1 :]]
    most_open = max(n for kind, _, _, n in events if kind == "fsync")
    assert most_open - baseline_fds <= checkpoint_local._SYNC_BATCH + 8, most_open - baseline_fds
    loaded = store.load_latest(KEY)
    assert loaded is not None and {n: loaded.read_bytes(n) for n in loaded.names} == many


def test_a_failed_write_or_fsync_commits_nothing_and_leaks_no_file(tmp_path: Path, monkeypatch) -> None:
    # Written files are held open until the commit's fsync: a failure anywhere before the
    # rename must close them and leave neither a checkpoint nor a temp directory.
    import errno

    store = LocalCheckpointStore(tmp_path / "s")
    ck = Checkpointer(store, KEY, keep=None)
    ck.save(b"first", step=1)
    baseline = sorted(os.listdir("/proc/self/fd"))

    class Full:
        def __init__(self, inner) -> None:
            self._inner = inner

        def write(self, data) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self._inner, name)

    with pytest.raises(OSError, match="No space"), ck.writer(step=2) as w:
        with w.open("a.pt") as f:
            f.write(payload(1, 5000))  # written and held open for the commit
        g = w.open("b.pt")
        g._out = Full(g._out)  # the disk fills up during the second file
        with g:
            g.write(payload(2, 5000))

    real_fsync = os.fsync
    victim = {}

    def failing_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/data/big.bin"):
            victim["hit"] = True
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(CheckpointError, match="Input/output error") as caught:
        store.save(KEY, {"big.bin": payload(3, 100_000), "small.bin": b"s"}, step=3)
    monkeypatch.undo()
    assert victim and caught.value.retryable
    assert [i.step for i in store.list(KEY)] == [1]
    assert not [n for n in os.listdir(store.key_dir(KEY)) if n.startswith(".tmp-")]
    assert sorted(os.listdir("/proc/self/fd")) == baseline, "a held file was left open"
    assert ck.load() == b"first"


def test_directory_checkpoint_refuses_symlinked_dirs(tmp_path: Path) -> None:
    src = tmp_path / "d"
    src.mkdir()
    (src / "f").write_bytes(b"1")
    (src / "loop").symlink_to(src, target_is_directory=True)
    ck = Checkpointer(LocalCheckpointStore(tmp_path / "store"), KEY)
    with pytest.raises(SerializationError, match="symlink to a directory"):
        ck.save(src)


def test_file_symlinks_are_saved_as_content(tmp_path: Path) -> None:
    src = tmp_path / "d"
    src.mkdir()
    (tmp_path / "real.bin").write_bytes(b"real")
    (src / "link.bin").symlink_to(tmp_path / "real.bin")
    ck = Checkpointer(LocalCheckpointStore(tmp_path / "store"), KEY)
    ck.save(src)
    out = ck.load(tmp_path / "out")
    assert (out / "link.bin").read_bytes() == b"real" and not (out / "link.bin").is_symlink()


def test_a_fifo_source_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    store = LocalCheckpointStore(tmp_path / "store")
    with pytest.raises(SerializationError, match="not a regular file"):
        store.save(KEY, {"p": fifo})
    assert store.list(KEY) == [] and os.listdir(store.key_dir(KEY)) == [".lock"]


def test_failed_save_leaves_no_temp_dir(tmp_path: Path) -> None:
    store = LocalCheckpointStore(tmp_path)
    with pytest.raises(CheckpointError):
        store.save(KEY, {"a": b"1", "b": tmp_path / "missing.bin"})
    assert store.list(KEY) == []
    assert [n for n in os.listdir(store.key_dir(KEY)) if n.startswith(".tmp-")] == []


def test_overlong_key_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="too long"):
        LocalCheckpointStore(tmp_path).save("x/" * 120 + "y", {"a": b"1"})


def test_checkpoint_modules_do_not_use_pickle() -> None:
    package = Path(__file__).resolve().parents[2] / "core" / "checkpoint"
    for module in package.glob("*.py"):
        source = module.read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|dill|cloudpickle)\b", source, re.M)


def test_store_for_uri_picks_local_paths_and_refuses_unknown_schemes(tmp_path) -> None:
    from interlock.core.base.errors import CheckpointError
    from interlock.core.checkpoint.local import LocalCheckpointStore
    from interlock.core.checkpoint.store import store_for_uri

    assert isinstance(store_for_uri(str(tmp_path / "ckpt")), LocalCheckpointStore)
    with pytest.raises(CheckpointError) as info:
        store_for_uri("gs://bucket/prefix")
    assert "no checkpoint store for gs://" in str(info.value) and "s3" in str(info.value)


def test_a_data_file_replaced_by_a_symlink_is_refused(tmp_path: Path) -> None:
    # Same bytes outside the store: the checksum would pass, so the symlink itself must be refused.
    store = LocalCheckpointStore(tmp_path / "store")
    info = store.save(KEY, {"w.bin": b"weights"}, step=1)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"weights")
    data_file = store.checkpoint_dir(info.key, info.id) / "data" / "w.bin"
    assert data_file.exists()
    data_file.unlink()
    data_file.symlink_to(outside)
    with pytest.raises(CheckpointError, match="symlink"):
        store.load_latest(KEY)
