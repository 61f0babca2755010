"""Subprocess used by test_checkpoint_faults.py: saves one ~50 MB checkpoint when told to.

Usage: python checkpoint_writer.py ROOT KEY STEP PART_BYTES PARTS KEEP DURABLE

Builds the payload of STEP first, prints ``ready``, waits for a line on stdin, then saves
it (PARTS files) with LocalCheckpointStore, prunes to KEEP, and prints ``done <id>``. The
test SIGKILLs it at random moments after ``go``. DURABLE=0 skips fsync (a SIGKILL keeps
the page cache, so atomicity does not depend on it). Stdlib and interlock.core only, so it
starts fast.
"""

from __future__ import annotations

import hashlib
import random
import struct
import sys


def make_part(step: int, part: int, size: int) -> bytes:
    """Deterministic content of one part: a seeded 1 MiB block, every MiB stamped with
    (step, part, index) so that a mix-up, a shift or a truncation changes the digest."""
    mib = 1 << 20
    block = random.Random(step * 1000 + part).randbytes(mib)
    chunks = [struct.pack(">QQQ", step, part, i) + block[24:] for i in range(size // mib + 1)]
    return b"".join(chunks)[:size]


def part_digests(step: int, part_bytes: int, parts: int) -> dict[str, str]:
    return {
        f"part-{p}.bin": hashlib.sha256(make_part(step, p, part_bytes)).hexdigest()
        for p in range(parts)
    }


def main(argv: list[str]) -> int:
    root, key, step, part_bytes, parts, keep, durable = argv
    from interlock.core.checkpoint.local import LocalCheckpointStore

    step_i, size, n = int(step), int(part_bytes), int(parts)
    files = {f"part-{p}.bin": make_part(step_i, p, size) for p in range(n)}
    store = LocalCheckpointStore(root, durable=durable == "1")
    print("ready", flush=True)
    sys.stdin.readline()
    info = store.save(key, files, step=step_i, metadata={"writer": "fault-test"})
    store.prune(key, int(keep))
    print(f"done {info.id}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
