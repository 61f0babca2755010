"""Hashing beside the I/O (issue 12): the digest is still of exactly the bytes written, in
order, whatever the caller does with its buffers after a write returns."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from checkpoints import contract

from interlock.core.checkpoint import Checkpointer
from interlock.core.checkpoint_io import IO_CHUNK, OverlappedHash
from interlock.core.checkpoint_local import LocalCheckpointStore

MiB = 1 << 20


def test_queued_chunks_are_hashed_in_order() -> None:
    # Large chunks go to the worker; small ones arriving while it is busy must queue behind
    # them, not be hashed at once (out of order).
    chunks = []
    for i in range(40):
        size = (3 * MiB + i) if i % 3 == 0 else (i * 997 % 5000 + 1)
        chunks.append(os.urandom(size))
    h = OverlappedHash(ahead=4 * MiB)
    for c in chunks:
        h.update(c)
    whole = b"".join(chunks)
    assert h.hexdigest() == hashlib.sha256(whole).hexdigest()
    assert h.size == len(whole)


def test_a_writer_hashes_what_it_wrote_although_the_caller_reuses_its_buffer(tmp_path: Path) -> None:
    # torch.save-like: one mutable buffer, refilled after each write returns. The hash runs
    # later, on a worker: it must see each write's bytes, not the buffer's later content.
    ck = Checkpointer(LocalCheckpointStore(tmp_path / "s"), contract.KEY)
    buf = bytearray(IO_CHUNK + 12345)  # over one piece: split and snapshotted piece by piece
    written = []
    with ck.open_write("state.pt", step=1) as f:
        for seed in range(6):
            buf[:] = contract.payload(seed, len(buf))
            f.write(buf)
            written.append(bytes(buf))
            f.write(memoryview(buf)[5:300_000])  # a slice of it, large enough to be handed off
            written.append(bytes(buf[5:300_000]))
        buf[:] = b"\0" * len(buf)  # changed before the commit hashes the last pieces
    whole = b"".join(written)
    info = ck.latest
    assert info is not None and info.files["state.pt"].sha256 == contract.sha(whole)
    with ck.open_read() as f:
        assert f.read() == whole


def test_a_save_from_a_file_hashes_it_while_it_is_copied(tmp_path: Path) -> None:
    # Chunks read from the source run ahead of the hash (several queued): still one digest
    # of the whole file, in order.
    content = os.urandom(5 * IO_CHUNK + 3)
    src = tmp_path / "model.bin"
    src.write_bytes(content)
    store = LocalCheckpointStore(tmp_path / "s")
    info = store.save(contract.KEY, {"model.bin": src}, step=1)
    assert info.files["model.bin"].sha256 == contract.sha(content)


def test_a_save_and_a_load_work_while_the_interpreter_shuts_down(tmp_path: Path) -> None:
    # A last checkpoint written from an atexit hook: by then the thread pool takes no new
    # work ("cannot schedule new futures after interpreter shutdown"); hash in place.
    script = tmp_path / "last_save.py"
    script.write_text(
        textwrap.dedent(
            """
            import atexit, sys
            from interlock.core.checkpoint import Checkpointer
            from interlock.core.checkpoint_local import LocalCheckpointStore

            ck = Checkpointer(LocalCheckpointStore(sys.argv[1]), "k/run/step", keep=None)

            def last():
                ck.save(b"x" * (2 << 20), step=7)
                assert ck.load() == b"x" * (2 << 20)
                with ck.open_read() as f:
                    assert f.read() == b"x" * (2 << 20)
                print("saved and loaded", flush=True)

            atexit.register(last)
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True, timeout=120
    )
    assert "saved and loaded" in proc.stdout, proc.stderr
    assert [i.step for i in LocalCheckpointStore(tmp_path / "store").list("k/run/step")] == [7]
