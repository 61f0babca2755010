"""The contract every ``CheckpointStore`` must meet, as a reusable test base class.

Use it for a store by subclassing it in a ``test_*.py`` file under a ``Test*`` name and
implementing the hooks below (they reach under the store's API to simulate crashes and
corruption). Override the ``store`` fixture instead of ``make_store`` when the store needs
other fixtures (an S3 store needs a moto server)::

    from checkpoints import contract   # tests/ is on pytest's pythonpath

    class TestMyStore(contract.CheckpointStoreContract):
        @pytest.fixture
        def store(self, tmp_path, moto_server): ...
        def leave_uncommitted(self, store, key, checkpoint_id, files): ...
        ...

This module is not collected on its own (no ``test_`` prefix, base class not ``Test*``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import xxhash

from interlock.core.base.errors import CheckpointError, InterlockError, SerializationError
from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.manifest import CheckpointInfo
from interlock.core.checkpoint.store import CheckpointStore, LoadedCheckpoint

KEY = "fraud-retrain/run-1/train"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(data: bytes) -> str:
    """What a manifest records for ``data`` by default: its xxh3_128, computed here with
    xxhash directly (not through the store's code)."""
    return "xxh3_128:" + xxhash.xxh3_128(data).hexdigest()


def payload(seed: int, size: int = 4096) -> bytes:
    """Distinct, deterministic content per seed (so a mix-up between checkpoints shows)."""
    block = hashlib.sha256(str(seed).encode()).digest()
    return (block * (size // len(block) + 1))[:size]


class CheckpointStoreContract:
    """Behaviour shared by every store. Subclasses implement the hooks."""

    # --- hooks ---------------------------------------------------------------------

    def make_store(self, tmp_path: Path) -> CheckpointStore:
        raise NotImplementedError

    def reopen(self, store: CheckpointStore) -> CheckpointStore:
        """A new store object on the same backing storage (a retry in a new process)."""
        raise NotImplementedError

    def leave_uncommitted(
        self, store: CheckpointStore, key: str, checkpoint_id: str, files: dict[str, bytes]
    ) -> None:
        """Leave data where checkpoint ``checkpoint_id`` would live, but no manifest."""
        raise NotImplementedError

    def leave_torn_write(self, store: CheckpointStore, key: str) -> None:
        """Leave what a writer killed half-way through a save leaves behind."""
        raise NotImplementedError

    def leftovers(self, store: CheckpointStore, key: str) -> list[str]:
        """Names of abandoned in-progress writes still present for ``key``."""
        raise NotImplementedError

    def flip_byte(self, store: CheckpointStore, info: CheckpointInfo, name: str, offset: int) -> None:
        """Flip one bit of byte ``offset`` of committed file ``name`` in place."""
        raise NotImplementedError

    def corrupt_manifest(self, store: CheckpointStore, info: CheckpointInfo) -> None:
        """Change one value inside the committed manifest (still valid JSON)."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> CheckpointStore:
        return self.make_store(tmp_path)

    # The reader-racing-save-and-prune test, sized per store (S3 round trips are slow):
    # rounds of save+prune, and files per checkpoint (many widen the window in which a
    # delete is half done).
    race_rounds = 39
    race_files = 20
    race_file_size = 8_000

    def racing_writer(self, store: CheckpointStore) -> CheckpointStore:
        """The store the racing writer saves and prunes with (default ``store`` itself)."""
        return store

    # --- helpers -------------------------------------------------------------------

    @staticmethod
    def read_all(loaded: LoadedCheckpoint) -> dict[str, bytes]:
        return {n: loaded.read_bytes(n) for n in loaded.names}

    # --- empty store ---------------------------------------------------------------

    def test_empty_store_has_nothing(self, store: CheckpointStore) -> None:
        assert isinstance(store, CheckpointStore)
        assert store.load_latest(KEY) is None
        assert store.load_latest(KEY, fallback=True) is None
        assert store.list(KEY) == []
        assert store.prune(KEY, keep=1) == []
        ck = Checkpointer(store, KEY)
        assert ck.load() is None
        assert ck.latest_step is None
        assert ck.latest is None

    # --- round trips ---------------------------------------------------------------

    def test_save_and_load_files_round_trip(self, store: CheckpointStore, tmp_path: Path) -> None:
        big = os.urandom(3 * (1 << 20) + 17)  # several read chunks, odd size
        src = tmp_path / "src.bin"
        src.write_bytes(big)
        files: dict[str, Any] = {
            "weights.bin": payload(1, 10_000),
            "optim/state.bin": bytearray(payload(2, 333)),
            "empty.bin": b"",
            "from_path.bin": src,
            "unicodé name.txt": "héllo".encode(),
        }
        info = store.save(KEY, files, step=7, metadata={"epoch": 3, "note": "ünï"})
        assert info.key == KEY and info.step == 7
        assert info.metadata == {"epoch": 3, "note": "ünï"}
        expected = {n: (v.read_bytes() if isinstance(v, Path) else bytes(v)) for n, v in files.items()}
        assert {n: (e.digest, e.size) for n, e in info.files.items()} == {
            n: (digest(b), len(b)) for n, b in expected.items()
        }
        loaded = store.load_latest(KEY)
        assert loaded is not None
        assert loaded.info == info
        assert loaded.names == sorted(expected)
        assert self.read_all(loaded) == expected
        out = loaded.copy_to(tmp_path / "restored")
        for name, data in expected.items():
            assert out.joinpath(*name.split("/")).read_bytes() == data

    def test_checkpointer_bytes_round_trip(self, store: CheckpointStore) -> None:
        ck = Checkpointer(store, KEY)
        data = payload(9, 100_001)
        info = ck.save(data, step=1)
        assert info.metadata["interlock.kind"] == "bytes"
        got = ck.load()
        assert type(got) is bytes and got == data
        assert ck.latest_step == 1

    def test_checkpointer_json_round_trip(self, store: CheckpointStore) -> None:
        ck = Checkpointer(store, KEY)
        state = {"epoch": 4, "lr": 0.000125, "best": None, "ok": True, "name": "ünï ✓",
                 "history": [1.5, 2.25, {"nested": [1, 2, [3]]}]}
        ck.save(state, step=4)
        assert ck.load() == state
        ck.save([1, "two", 3.0], step=5)
        assert ck.load() == [1, "two", 3.0]
        assert ck.latest_step == 5

    def test_checkpointer_directory_round_trip(self, store: CheckpointStore, tmp_path: Path) -> None:
        src = tmp_path / "model"
        (src / "shards" / "deep").mkdir(parents=True)
        (src / "empty_dir" / "inner").mkdir(parents=True)
        content = {
            "config.json": b'{"layers": 2}',
            "shards/0.bin": payload(1, 50_000),
            "shards/deep/1.bin": payload(2, 7),
            "zero.bin": b"",
        }
        for name, data in content.items():
            (src / name).write_bytes(data)
        ck = Checkpointer(store, KEY)
        info = ck.save(src, step=10)
        assert info.metadata["interlock.kind"] == "directory"
        assert set(info.files) == set(content)

        restored = ck.load()
        assert isinstance(restored, Path) and restored.is_dir() and restored != src
        for name, data in content.items():
            assert (restored / name).read_bytes() == data
        assert (restored / "empty_dir" / "inner").is_dir()
        got = {p.relative_to(restored).as_posix() for p in restored.rglob("*") if p.is_file()}
        assert got == set(content)

        dest = tmp_path / "into"
        assert ck.load(dest) == dest
        assert (dest / "shards/deep/1.bin").read_bytes() == content["shards/deep/1.bin"]
        # Restoring on top of other files would mix two states: refused.
        with pytest.raises(CheckpointError, match="not an empty directory"):
            ck.load(dest)

    def test_checkpointer_single_file_round_trip(self, store: CheckpointStore, tmp_path: Path) -> None:
        f = tmp_path / "model.pt"
        f.write_bytes(payload(5, 2048))
        ck = Checkpointer(store, KEY)
        ck.save(f, step=2)
        got = ck.load(tmp_path / "out")
        assert got == tmp_path / "out" / "model.pt"
        assert got.read_bytes() == payload(5, 2048)

    def test_checkpointer_refuses_ambiguous_or_unserialisable_state(self, store: CheckpointStore) -> None:
        ck = Checkpointer(store, KEY)
        with pytest.raises(SerializationError, match="pathlib.Path"):
            ck.save("/some/dir")
        with pytest.raises(SerializationError, match="not JSON-able"):
            ck.save({"x": object()})
        with pytest.raises(SerializationError):
            ck.save(3.5)
        with pytest.raises(CheckpointError, match="reserved"):
            ck.save(b"x", metadata={"interlock.kind": "json"})
        assert store.list(KEY) == []

    def test_save_rejects_str_content_and_bad_names(self, store: CheckpointStore) -> None:
        with pytest.raises(SerializationError, match="str is ambiguous"):
            store.save(KEY, {"a.bin": "not bytes"})  # type: ignore[dict-item]
        for bad in ["../escape", "/abs", "a//b", "a/./b", "", "back\\slash", "nul\x00"]:
            with pytest.raises(CheckpointError):
                store.save(KEY, {bad: b"x"})
        with pytest.raises(CheckpointError, match="also used as a directory"):
            store.save(KEY, {"a": b"1", "a/b": b"2"})
        assert store.list(KEY) == []

    def test_metadata_must_be_json_and_loads_back_equal(self, store: CheckpointStore) -> None:
        with pytest.raises(SerializationError, match="metadata.when has type object"):
            store.save(KEY, {"s": b"1"}, metadata={"when": object()})
        with pytest.raises(SerializationError, match="non-string key 1"):
            store.save(KEY, {"s": b"1"}, metadata={"m": {1: "x"}})
        assert store.list(KEY) == []
        info = store.save(KEY, {"s": b"1"}, metadata={"shape": (3, 4), "nested": {"ok": [True, None]}})
        assert info.metadata == {"shape": [3, 4], "nested": {"ok": [True, None]}}
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == info

    def test_invalid_keys_are_rejected(self, store: CheckpointStore) -> None:
        for bad in ["", "a//b", "../etc", "a/../b", "a/.", "/lead", "trail/", "ctl\x01"]:
            with pytest.raises(CheckpointError):
                store.save(bad, {"x": b"1"})
            with pytest.raises(CheckpointError):
                store.load_latest(bad)
            with pytest.raises(CheckpointError):
                Checkpointer(store, bad)

    # --- listing and pruning -------------------------------------------------------

    def test_list_is_committed_oldest_first(self, store: CheckpointStore) -> None:
        infos = [store.save(KEY, {"s": payload(i)}, step=i * 10) for i in range(5)]
        listed = store.list(KEY)
        assert [i.id for i in listed] == [i.id for i in infos]
        assert [i.step for i in listed] == [0, 10, 20, 30, 40]
        ids = [i.id for i in listed]
        # Monotonic and sortable both as text and as numbers.
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert [int(i) for i in ids] == sorted(int(i) for i in ids)
        assert all(a.created_at <= b.created_at for a, b in zip(listed, listed[1:], strict=False))
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info.step == 40
        assert loaded.read_bytes("s") == payload(4)

    def test_prune_keeps_the_newest(self, store: CheckpointStore) -> None:
        infos = [store.save(KEY, {"s": payload(i)}, step=i) for i in range(5)]
        removed = store.prune(KEY, keep=2)
        assert [i.id for i in removed] == [i.id for i in infos[:3]]
        assert [i.id for i in store.list(KEY)] == [i.id for i in infos[3:]]
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.read_bytes("s") == payload(4)
        assert store.prune(KEY, keep=2) == []
        # The survivors still verify after their neighbours were deleted.
        assert store.prune(KEY, keep=1) == [infos[3]]
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == infos[4]
        assert store.prune(KEY, keep=0) == [infos[4]]
        assert store.load_latest(KEY) is None and store.list(KEY) == []
        with pytest.raises(CheckpointError):
            store.prune(KEY, keep=-1)

    def test_checkpointer_prunes_to_keep(self, store: CheckpointStore) -> None:
        ck = Checkpointer(store, KEY, keep=2)
        for step in range(1, 5):
            ck.save({"step": step}, step=step)
        ck.flush()  # the prune runs after the commit, off the save's path: wait for it
        assert [i.step for i in store.list(KEY)] == [3, 4]
        assert ck.load() == {"step": 4}
        with pytest.raises(CheckpointError):
            Checkpointer(store, KEY, keep=0)

    # --- keys ----------------------------------------------------------------------

    def test_keys_are_isolated(self, store: CheckpointStore) -> None:
        keys = [
            "fraud-retrain/run-1/train",
            "fraud-retrain/run-2/train",
            "fraud-retrain/run-1",  # a prefix of the first key
            "fraud-retrain/run-1/train2",  # shares a text prefix
            "fraud-retrain/run-1/train/sub",  # nests under the first key
            "fraud retrain/run 1/train",  # spaces, encoded differently
        ]
        for n, key in enumerate(keys):
            store.save(key, {"s": payload(n)}, step=n)
            store.save(key, {"s": payload(100 + n)}, step=100 + n)
        for n, key in enumerate(keys):
            listed = store.list(key)
            assert [i.step for i in listed] == [n, 100 + n], key
            assert all(i.key == key for i in listed)
            loaded = store.load_latest(key)
            assert loaded is not None and loaded.read_bytes("s") == payload(100 + n)
        store.prune(keys[0], keep=0)
        assert store.list(keys[0]) == []
        for n, key in enumerate(keys[1:], start=1):
            assert len(store.list(key)) == 2
            loaded = store.load_latest(key)
            assert loaded is not None and loaded.read_bytes("s") == payload(100 + n)

    def test_retry_resumes_and_new_run_starts_fresh(self, store: CheckpointStore) -> None:
        first = Checkpointer(store, "fraud-retrain/run-1/train", keep=2)
        first.save({"epoch": 3}, step=3)
        # A retry of the same run: new process, new store object, same key.
        retry = Checkpointer(self.reopen(store), "fraud-retrain/run-1/train", keep=2)
        assert retry.latest_step == 3
        assert retry.load() == {"epoch": 3}
        retry.save({"epoch": 4}, step=4)
        assert first.load() == {"epoch": 4}
        # A new run: another key, nothing to resume.
        fresh = Checkpointer(self.reopen(store), "fraud-retrain/run-2/train")
        assert fresh.load() is None and fresh.latest_step is None

    # --- crashes -------------------------------------------------------------------

    def test_checkpoint_without_manifest_is_ignored(self, store: CheckpointStore) -> None:
        good = store.save(KEY, {"s": payload(1)}, step=1)
        stray_id = f"{int(good.id) + 1:0{len(good.id)}d}"
        self.leave_uncommitted(store, KEY, stray_id, {"s": payload(2)})
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == good
        assert loaded.read_bytes("s") == payload(1)
        assert [i.id for i in store.list(KEY)] == [good.id]
        # The next save commits normally and is the one loaded.
        new = store.save(KEY, {"s": payload(3)}, step=3)
        assert int(new.id) > int(good.id)
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == new and loaded.read_bytes("s") == payload(3)
        assert [i.id for i in store.list(KEY)] == [good.id, new.id]

    def test_torn_write_is_ignored_and_cleaned(self, store: CheckpointStore) -> None:
        good = store.save(KEY, {"s": payload(1)}, step=1)
        self.leave_torn_write(store, KEY)
        assert self.leftovers(store, KEY), "the hook must leave something behind"
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == good and loaded.read_bytes("s") == payload(1)
        assert store.list(KEY) == [good]
        new = store.save(KEY, {"s": payload(2)}, step=2)
        assert self.leftovers(store, KEY) == []
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.info == new
        # prune cleans too.
        self.leave_torn_write(store, KEY)
        assert self.leftovers(store, KEY)
        assert store.prune(KEY, keep=5) == []
        assert self.leftovers(store, KEY) == []
        assert store.list(KEY) == [good, new]

    # --- concurrency ---------------------------------------------------------------

    def test_readers_never_see_a_half_pruned_checkpoint(self, store: CheckpointStore) -> None:
        def files(step: int) -> dict[str, bytes]:
            return {f"f{i:02d}": payload(step * 100 + i, self.race_file_size) for i in range(self.race_files)}

        writer = self.racing_writer(store)
        writer.save(KEY, files(0), step=0)
        stop = threading.Event()
        problems: list[str] = []
        loads = 0

        def reader() -> None:
            nonlocal loads
            reader_store = self.reopen(store)  # another process's view of the same storage
            while not stop.is_set():
                try:
                    loaded = reader_store.load_latest(KEY)
                except CheckpointError as exc:
                    problems.append(str(exc))
                    continue
                if loaded is None:
                    problems.append("load_latest returned None")
                    continue
                try:
                    got = {n: loaded.read_bytes(n) for n in loaded.names}
                except CheckpointError:
                    continue  # pruned between verify and read: refused, never wrong data
                if got != files(loaded.info.step):
                    problems.append(f"wrong content for step {loaded.info.step}")
                loads += 1

        t = threading.Thread(target=reader)
        t.start()
        try:
            for step in range(1, self.race_rounds + 1):
                writer.save(KEY, files(step), step=step)
                writer.prune(KEY, keep=1)
        finally:
            stop.set()
            t.join()
        assert problems == []
        assert loads > 0
        assert [i.step for i in writer.list(KEY)] == [self.race_rounds]

    # --- corruption ----------------------------------------------------------------

    def test_flipped_byte_is_refused(self, store: CheckpointStore) -> None:
        old = store.save(KEY, {"weights.bin": payload(1, 10_000)}, step=1)
        new = store.save(KEY, {"weights.bin": payload(2, 10_000), "b": b"ok"}, step=2)
        self.flip_byte(store, new, "weights.bin", 5_000)
        with pytest.raises(CheckpointError) as err:
            store.load_latest(KEY)
        msg = str(err.value)
        assert KEY in msg and new.id in msg and "weights.bin" in msg
        assert err.value.code == "CHECKPOINT" and isinstance(err.value, InterlockError)
        # Explicit opt-in: the newest checkpoint that verifies, with its own content.
        loaded = store.load_latest(KEY, fallback=True)
        assert loaded is not None and loaded.info == old
        assert loaded.read_bytes("weights.bin") == payload(1, 10_000)

    def test_flipped_byte_is_refused_by_checkpointer(self, store: CheckpointStore, tmp_path: Path) -> None:
        src = tmp_path / "d"
        src.mkdir()
        (src / "w.bin").write_bytes(payload(1, 4096))
        ck = Checkpointer(store, KEY)
        info = ck.save(src, step=1)
        self.flip_byte(store, info, "w.bin", 0)
        with pytest.raises(CheckpointError, match="w.bin"):
            ck.load(tmp_path / "out")
        with pytest.raises(CheckpointError, match="no checkpoint of key .* verifies"):
            Checkpointer(store, KEY, fallback=True).load(tmp_path / "out2")

    def test_flip_in_an_older_checkpoint_does_not_affect_the_newest(self, store: CheckpointStore) -> None:
        old = store.save(KEY, {"s": payload(1)}, step=1)
        store.save(KEY, {"s": payload(2)}, step=2)
        self.flip_byte(store, old, "s", 10)
        loaded = store.load_latest(KEY)
        assert loaded is not None and loaded.read_bytes("s") == payload(2)

    def test_corrupt_manifest_is_refused(self, store: CheckpointStore) -> None:
        old = store.save(KEY, {"s": payload(1)}, step=1)
        new = store.save(KEY, {"s": payload(2)}, step=2)
        self.corrupt_manifest(store, new)
        with pytest.raises(CheckpointError) as err:
            store.load_latest(KEY)
        assert KEY in str(err.value) and new.id in str(err.value) and "manifest" in str(err.value)
        assert [i.id for i in store.list(KEY)] == [old.id]
        loaded = store.load_latest(KEY, fallback=True)
        assert loaded is not None and loaded.info == old and loaded.read_bytes("s") == payload(1)

    @pytest.mark.parametrize(
        "forged",
        [
            {"interlock.kind": "file", "interlock.file_name": "../../../escaped.txt"},
            {"interlock.kind": "file", "interlock.file_name": "/etc/hostname"},
            {"interlock.kind": "file", "interlock.file_name": "not-a-file-of-it.bin"},
            {"interlock.kind": "file", "interlock.file_name": "sub/../../x"},
            {"interlock.kind": "directory", "interlock.empty_dirs": ["../../escaped-dir"]},
            {"interlock.kind": "directory", "interlock.empty_dirs": ["/tmp/escaped-dir"]},
        ],
        ids=["dotdot", "absolute", "not-listed", "nested-dotdot", "empty-dir-dotdot", "empty-dir-absolute"],
    )
    def test_a_forged_manifest_cannot_point_load_outside_the_checkpoint(
        self, store: CheckpointStore, tmp_path: Path, forged: dict[str, Any]
    ) -> None:
        # A manifest with a valid checksum whose metadata was not written by Checkpointer.save
        # (the store's own save does not reserve interlock.* keys): what an attacker with write
        # access to the store, or a bug elsewhere, would leave.
        store.save(KEY, {"state.bin": payload(1, 64)}, step=1, metadata=forged)
        out = tmp_path / "restore"
        with pytest.raises(CheckpointError):
            Checkpointer(store, KEY).load(out)
        assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "escaped-dir").exists()
        assert not Path("/tmp/escaped-dir").exists()

    # --- one pass over the data, streamed reads and writes (issue 12) ----------------

    def test_a_lazy_load_checks_contents_as_they_are_read(self, store: CheckpointStore, tmp_path: Path) -> None:
        big = payload(3, 3 * (1 << 20) + 5)
        info = store.save(KEY, {"w.bin": big, "s": b"small"}, step=1)
        loaded = store.load_latest(KEY, verify=False)  # type: ignore[call-arg]
        assert loaded is not None and loaded.info == info and loaded.verified is False
        assert loaded.read_bytes("w.bin") == big
        self.flip_byte(store, info, "w.bin", len(big) - 1)  # the very last byte
        loaded = store.load_latest(KEY, verify=False)  # type: ignore[call-arg]
        assert loaded is not None  # present and of the right size: found out by the read
        with pytest.raises(CheckpointError, match="w.bin.*xxh3_128 expected"):
            loaded.read_bytes("w.bin")
        with pytest.raises(CheckpointError, match="w.bin"):
            loaded.copy_to(tmp_path / "out")
        assert not (tmp_path / "out" / "w.bin").exists()  # nothing of it is left behind
        # The default still verifies everything before returning.
        with pytest.raises(CheckpointError, match="w.bin"):
            store.load_latest(KEY)

    def test_a_streamed_read_raises_before_the_final_chunk(self, store: CheckpointStore) -> None:
        size = 20 * (1 << 20) + 3  # several 8 MiB chunks
        content = payload(4, size)
        info = store.save(KEY, {"state.bin": content}, step=1, metadata={"interlock.kind": "bytes"})
        with Checkpointer(store, KEY).open_read(seekable=False) as f:
            assert b"".join(iter(lambda: f.read(1 << 20), b"")) == content
        self.flip_byte(store, info, "state.bin", 10)  # early: read and handed out long before the end
        handed: list[bytes] = []
        with pytest.raises(CheckpointError, match="state.bin.*xxh3_128 expected"), \
                Checkpointer(store, KEY).open_read(seekable=False) as f:
            while chunk := f.read(1 << 20):
                handed.append(chunk)
        assert sum(map(len, handed)) < size, "the final chunk must never be handed out"
        # Seekable (what torch.load needs): reading at the end verifies the whole file first.
        with pytest.raises(CheckpointError, match="state.bin"), Checkpointer(store, KEY).open_read() as f:
            f.seek(-4, os.SEEK_END)
            f.read()
        with pytest.raises(CheckpointError, match="state.bin"):
            Checkpointer(store, KEY).load()

    @pytest.mark.parametrize("seekable", [True, False], ids=["seekable", "front-to-back"])
    def test_readinto_a_reused_buffer_checks_like_read(self, store: CheckpointStore, seekable: bool) -> None:
        size = 3 * (1 << 20) + 12345  # several hash slices, a short final call
        content = os.urandom(size)  # no repeating pattern: the buffer shows which bytes it holds
        info = store.save(KEY, {"state.bin": content}, step=1, metadata={"interlock.kind": "bytes"})
        buf = bytearray(1 << 20)
        with Checkpointer(store, KEY).open_read(seekable=seekable) as f:
            got = bytearray()
            while n := f.readinto(buf):
                got += buf[:n]
            assert bytes(got) == content and f.readinto(buf) == 0
        for offset in (10, size - 1):  # early (handed out long before the end) and the very last byte
            self.flip_byte(store, info, "state.bin", offset)
            accepted = 0
            buf[:] = b"\xff" * len(buf)
            with pytest.raises(CheckpointError, match="state.bin.*xxh3_128 expected"), \
                    Checkpointer(store, KEY).open_read(seekable=seekable) as f:
                while n := f.readinto(buf):
                    accepted += n
            assert accepted < size, "the call that reaches the end must raise, not return"
            tail = size % len(buf)  # what the failing call would have filled: the file's end
            assert bytes(buf[: tail - 1]) != content[-tail:-1], "a corrupt file's end is left in the buffer"
            self.flip_byte(store, info, "state.bin", offset)  # back to the committed bytes
        self.flip_byte(store, info, "state.bin", 5)
        with pytest.raises(CheckpointError, match="state.bin"):  # a seek to the end verifies first
            with Checkpointer(store, KEY).open_read() as f:
                f.seek(size - 4)
                f.readinto(bytearray(4))

    def test_open_write_and_open_read_round_trip(self, store: CheckpointStore, tmp_path: Path) -> None:
        ck = Checkpointer(store, KEY, keep=2)
        parts = [payload(i, 1 << 20) for i in range(5)] + [b"tail"]
        with ck.open_write("model.pt", step=3, metadata={"epoch": 3}) as f:
            for part in parts:
                f.write(part)
            f.write(memoryview(bytearray(b"mv")))  # any buffer; the caller may reuse it
        whole = b"".join(parts) + b"mv"
        info = ck.latest
        assert info is not None and info.step == 3 and info.metadata["epoch"] == 3
        assert info.files["model.pt"].digest == digest(whole)
        with ck.open_read() as f:  # the one file, seekable
            assert f.read(10) == whole[:10]
            f.seek(-7, os.SEEK_END)
            assert f.read() == whole[-7:]
            f.seek(0)
            assert f.read() == whole
        with ck.open_read("model.pt", seekable=False) as f:
            assert f.read() == whole
        restored = ck.load(tmp_path / "out")  # a file checkpoint: restored as a file
        assert restored == tmp_path / "out" / "model.pt" and restored.read_bytes() == whole
        with pytest.raises(CheckpointError, match="no file 'other'"), ck.open_read("other"):
            pass

    def test_a_writer_commits_several_files_or_nothing(self, store: CheckpointStore, tmp_path: Path) -> None:
        ck = Checkpointer(store, KEY)
        with pytest.raises(CheckpointError, match="no committed checkpoint"), ck.open_read():
            pass
        with pytest.raises(RuntimeError, match="boom"), ck.writer(step=1) as w:
            with w.open("a.pt") as f:
                f.write(payload(1, 5000))
            raise RuntimeError("boom")
        assert store.list(KEY) == [] and ck.load() is None  # abandoned: never committed
        with ck.writer(step=2) as w:
            with w.open("model/a.pt") as f:
                f.write(payload(1, 5000))
            with w.open("optim.pt") as f:
                f.write(payload(2, 70))
            with pytest.raises(CheckpointError, match="already written"):
                w.open("optim.pt")
        assert w.info is not None and w.info.step == 2
        out = ck.load(tmp_path / "restored")
        assert (out / "model" / "a.pt").read_bytes() == payload(1, 5000)
        assert (out / "optim.pt").read_bytes() == payload(2, 70)
        with ck.open_read("optim.pt") as f:
            assert f.read() == payload(2, 70)
        with pytest.raises(CheckpointError, match="has 2 files"), ck.open_read():
            pass

    def test_torch_save_and_load_through_the_streams(self, store: CheckpointStore) -> None:
        torch = pytest.importorskip("torch")
        ck = Checkpointer(store, KEY)
        state = {"w": torch.arange(300_000, dtype=torch.float32), "epoch": 7}
        with ck.open_write("state.pt", step=7) as f:
            torch.save(state, f)
        with ck.open_read() as f:
            got = torch.load(f, weights_only=True)
        assert got["epoch"] == 7 and torch.equal(got["w"], state["w"])

    # --- pruning off the save's critical path ----------------------------------------

    def test_prune_runs_after_the_commit_off_the_save(self, store: CheckpointStore, caplog) -> None:
        gate = threading.Event()
        entered = threading.Event()
        calls: list[int] = []

        class SlowPrune:  # the store, with a prune that waits to be let through
            def __getattr__(self, name: str) -> Any:
                return getattr(store, name)

            def prune(self, key: str, keep: int) -> list[CheckpointInfo]:
                calls.append(keep)
                entered.set()
                assert gate.wait(30)
                if len(calls) == 1:
                    raise CheckpointError("prune failed once")  # logged; the next one retries
                return store.prune(key, keep)

        ck = Checkpointer(SlowPrune(), KEY, keep=1)  # type: ignore[arg-type]
        first = ck.save(b"1", step=1)
        assert entered.wait(30)
        # The save returned while its prune is held: both committed, the newest loads.
        second = ck.save(b"2", step=2)
        assert [i.id for i in store.list(KEY)] == [first.id, second.id]
        assert ck.load() == b"2"
        gate.set()
        ck.flush()
        assert "pruning failed: prune failed once" in caplog.text
        assert [i.id for i in store.list(KEY)] == [second.id]
        assert len(calls) == 2  # the commit during the running prune asked for one more round
        assert ck.load() == b"2"
