"""Hashing as the bytes go by (issue 12): the digest is of exactly the bytes written, in
order, whatever the caller does with its buffers after a write returns. (The worker-thread
hashing these tests were written for is gone: xxh3 is hashed in line; they still hold.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkpoints import contract

from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.io import IO_CHUNK, Hasher
from interlock.core.checkpoint.local import LocalCheckpointStore

MiB = 1 << 20


@pytest.mark.parametrize("algorithm", ["xxh3_128", "sha256"])
def test_chunks_of_any_size_hash_as_the_whole(algorithm: str) -> None:
    chunks = [os.urandom((3 * MiB + i) if i % 3 == 0 else (i * 997 % 5000 + 1)) for i in range(40)]
    h = Hasher(algorithm)
    for i, c in enumerate(chunks):
        h.update(c if i % 2 else memoryview(bytearray(c)))
    whole = b"".join(chunks)
    expected = contract.digest(whole) if algorithm == "xxh3_128" else "sha256:" + hashlib.sha256(whole).hexdigest()
    assert h.digest() == expected
    assert h.size == len(whole)


def test_a_writer_hashes_what_it_wrote_although_the_caller_reuses_its_buffer(tmp_path: Path) -> None:
    # torch.save-like: one mutable buffer, refilled after each write returns. The digest
    # must be of each write's bytes, not of the buffer's later content.
    ck = Checkpointer(LocalCheckpointStore(tmp_path / "s"), contract.KEY)
    buf = bytearray(IO_CHUNK + 12345)  # over one I/O chunk
    written = []
    with ck.open_write("state.pt", step=1) as f:
        for seed in range(6):
            buf[:] = contract.payload(seed, len(buf))
            f.write(buf)
            written.append(bytes(buf))
            f.write(memoryview(buf)[5:300_000])  # a slice of it
            written.append(bytes(buf[5:300_000]))
        buf[:] = b"\0" * len(buf)  # changed before the commit
    whole = b"".join(written)
    info = ck.latest
    assert info is not None and info.files["state.pt"].digest == contract.digest(whole)
    with ck.open_read() as f:
        assert f.read() == whole


def test_a_save_from_a_file_hashes_it_while_it_is_copied(tmp_path: Path) -> None:
    # Copied through one reused buffer, chunk by chunk: still one digest of the whole
    # file, in order.
    content = os.urandom(5 * IO_CHUNK + 3)
    src = tmp_path / "model.bin"
    src.write_bytes(content)
    store = LocalCheckpointStore(tmp_path / "s")
    info = store.save(contract.KEY, {"model.bin": src}, step=1)
    assert info.files["model.bin"].digest == contract.digest(content)


def test_a_save_and_a_load_work_while_the_interpreter_shuts_down(tmp_path: Path) -> None:
    # A last checkpoint written from an atexit hook: by then a thread pool takes no new
    # work ("cannot schedule new futures after interpreter shutdown"). Hashing uses no
    # threads now; this keeps it so.
    script = tmp_path / "last_save.py"
    script.write_text(
        textwrap.dedent(
            """
            import atexit, sys
            from interlock.core.checkpoint.checkpointer import Checkpointer
            from interlock.core.checkpoint.local import LocalCheckpointStore

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
