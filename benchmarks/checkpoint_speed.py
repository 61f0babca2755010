"""Checkpoint save and load speed beside the plain I/O of the same bytes (issue 12, item 3).

    python benchmarks/checkpoint_speed.py [--sizes 64,256] [--repeat 3] [--stat median|min]
        [--no-s3] [--json PATH]

Sizes are MiB of one state (``bytes``, as ``torch.save`` into a ``BytesIO`` gives). Each
figure is the median (``--stat min``: the fastest, which neighbours on a shared machine
disturb least) of ``--repeat`` paired runs (interlock and native alternate, so drift and
neighbours hit both alike):

- local save: ``Checkpointer(LocalCheckpointStore, keep=2).save(state)`` (older checkpoints
  present, so pruning happens) vs writing the same bytes to a new file + fsync.
- local load: ``Checkpointer.load()`` (verified) vs ``open(f).read()`` of a file of the
  same size; both files were just written, so both reads come from the page cache. Peak
  memory of the load (tracemalloc) is in the note.
- local stream save / load: ``with ck.open_write() as f`` written in 8 MiB chunks vs the
  same writes + fsync of a plain file; ``with ck.open_read() as f`` read in 8 MiB chunks
  vs the same reads of a plain file (only when the streaming API is present); local stream
  readinto: ``f.readinto(buf)`` into one reused 8 MiB buffer, both sides; local torch.load
  (when torch is installed): ``torch.load(f)`` of one uint8 tensor of the size, from
  ``ck.open_read()`` vs from ``open()`` of a plain file (torch reads the end first).
- s3 save / s3 load: ``S3CheckpointStore`` against a moto server (its own process) vs
  boto3's ``upload_fileobj`` / ``get_object()["Body"].read()`` with boto3's defaults
  (client config and ``TransferConfig``), same bytes, same server; s3 stream load:
  ``open_read(seekable=False)`` vs ``get_object()["Body"].iter_chunks()``, both in 8 MiB
  chunks. The same checks on the wire: the store is made with
  ``request_checksum_calculation="when_supported"`` (boto3's default, which it uses on AWS),
  so both sides send a CRC32 of every part that the server checks on arrival; interlock
  also hashes every file into the manifest and verifies it on every load, while boto3
  validates the stored CRC on download only for a single-part object (a multipart one's
  composite CRC is skipped: at these sizes, nothing is checked on the native load).
  "s3 save no CRC" is the store's default with an ``endpoint_url`` (no CRC sent)
  vs ``upload_fileobj`` through a client configured the same way. The notes give the CPU
  seconds of this process and of the moto server per operation (medians): on a shared
  machine they say more than the wall clock.

The per-file digest is what a verified load pays on top of a read: the "digest alone" row
shows the cost of the digest the store actually uses (``store.digest``: xxh3_128 unless
opted in to sha256) on this CPU, and the "sha256 alone" row the cost of sha256, which
manifests of format version 1 used, for reference; the load average is in their notes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

from interlock.core.checkpoint.checkpointer import Checkpointer
from interlock.core.checkpoint.io import Hasher
from interlock.core.checkpoint.local import LocalCheckpointStore

MiB = 1 << 20
CHUNK = 8 * MiB


def row(figure: str, size: int, ours: float, native: float | None, note: str = "") -> dict:
    ratio = ours / native if native else None
    return {"figure": figure, "size": size, "interlock_s": ours, "native_s": native,
            "ratio": ratio, "note": note}


STAT: Callable[[list[float]], float] = statistics.median


def paired(ours: Callable[[], float], native: Callable[[], float], repeat: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(repeat):
        a.append(ours())
        b.append(native())
    return STAT(a), STAT(b)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def plain_read(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def chunked_read(f: io.BufferedIOBase) -> int:
    n = 0
    while chunk := f.read(CHUNK):
        n += len(chunk)
    return n


def torch_rows(mib: int, repeat: int, ck: Checkpointer, work: Path) -> list[dict]:
    """torch.load through ``ck.open_read()`` vs from a plain file: torch reads the zip's
    directory at the end first, so the stream checks the whole file before it answers."""
    try:
        import torch
    except ImportError:
        return []
    state = {"w": torch.frombuffer(bytearray(os.urandom(mib * MiB)), dtype=torch.uint8)}
    with ck.open_write("state.pt", step=10_000) as f:
        torch.save(state, f)
    ck.flush()
    plain = work / "plain-state.pt"
    torch.save(state, plain)
    del state

    def ours() -> float:
        with ck.open_read() as f:
            return timed(lambda: torch.load(f, weights_only=True))

    def native() -> float:
        with open(plain, "rb") as f:
            return timed(lambda: torch.load(f, weights_only=True))

    t_ours, t_native = paired(ours, native, repeat)
    plain.unlink()
    return [row("local torch.load", mib, t_ours, t_native,
                "torch.load(ck.open_read()) vs torch.load(open(plain file)), one uint8 tensor")]


def local_rows(mib: int, repeat: int, work: Path) -> list[dict]:
    data = os.urandom(mib * MiB)
    store = LocalCheckpointStore(work / "store")
    ck = Checkpointer(store, f"bench/local-{mib}/train", keep=2)
    for _ in range(2):  # two older checkpoints: every timed save also has one to prune
        ck.save(data, step=0)
    step = iter(range(1, 1000))
    n = iter(range(1000))

    def ours_save() -> float:
        t = timed(lambda: ck.save(data, step=next(step)))
        wait = getattr(ck, "flush", None)
        if wait:  # the prune runs after the commit, outside the save; let it end before timing more
            wait()
        return t

    def native_save() -> float:
        path = work / f"plain-{next(n)}.bin"
        t = timed(lambda: plain_write(path, data))
        path.unlink()
        return t

    rows = []
    s_ours, s_native = paired(ours_save, native_save, repeat)
    rows.append(row("local save", mib, s_ours, s_native, "Checkpointer.save(bytes), keep=2 vs write+fsync"))

    if hasattr(ck, "open_write"):
        view = memoryview(data)

        def write_chunks(f: io.RawIOBase) -> None:
            for at in range(0, len(view), CHUNK):
                f.write(view[at : at + CHUNK])

        def ours_stream_save() -> float:
            def go() -> None:
                with ck.open_write("state.pt", step=next(step)) as f:
                    write_chunks(f)

            t = timed(go)
            ck.flush()
            return t

        def native_stream_save() -> float:
            path = work / f"plain-{next(n)}.bin"

            def go() -> None:
                with open(path, "wb") as f:
                    write_chunks(f)
                    f.flush()
                    os.fsync(f.fileno())

            t = timed(go)
            path.unlink()
            return t

        w_ours, w_native = paired(ours_stream_save, native_stream_save, repeat)
        rows.append(row("local stream save", mib, w_ours, w_native,
                        "ck.open_write() written in 8 MiB chunks vs the same writes + fsync"))
        ck.save(data, step=next(step))  # the loads below read a bytes checkpoint
        ck.flush()

    plain = work / "plain-read.bin"
    plain_write(plain, data)
    data = b""  # free the state before the loads

    def ours_load() -> float:
        t0 = time.perf_counter()
        got = ck.load()
        t = time.perf_counter() - t0
        assert len(got) == mib * MiB
        return t

    def native_load() -> float:
        t0 = time.perf_counter()
        got = plain_read(plain)
        t = time.perf_counter() - t0
        assert len(got) == mib * MiB
        return t

    l_ours, l_native = paired(ours_load, native_load, repeat)
    tracemalloc.start()
    ck.load()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rows.append(row("local load", mib, l_ours, l_native,
                    f"Checkpointer.load() vs open().read(); peak traced memory {peak / MiB:.0f} MiB "
                    f"for a {mib} MiB state"))

    if hasattr(ck, "open_read"):
        def ours_stream() -> float:
            with ck.open_read() as f:
                t = timed(lambda: chunked_read(f))
            return t

        def native_stream() -> float:
            with open(plain, "rb") as f:
                return timed(lambda: chunked_read(f))

        st_ours, st_native = paired(ours_stream, native_stream, repeat)
        rows.append(row("local stream load", mib, st_ours, st_native,
                        "ck.open_read() read in 8 MiB chunks vs the same reads of a plain file"))

        chunk = bytearray(CHUNK)  # one buffer, reused by both sides (np.empty / torch.empty alike)

        def into(f: io.RawIOBase) -> int:
            n = 0
            while got := f.readinto(chunk):
                n += got
            return n

        def ours_into() -> float:
            with ck.open_read() as f:
                return timed(lambda: into(f))

        def native_into() -> float:
            with open(plain, "rb") as f:
                return timed(lambda: into(f))

        ri_ours, ri_native = paired(ours_into, native_into, repeat)
        rows.append(row("local stream readinto", mib, ri_ours, ri_native,
                        "ck.open_read() readinto one reused 8 MiB buffer vs the same of a plain file"))
        rows += torch_rows(mib, repeat, ck, work)

    buf = plain_read(plain)
    algorithm = store.digest

    def digest() -> None:
        h = Hasher(algorithm)
        h.update(buf)
        h.digest()

    d = STAT([timed(digest) for _ in range(repeat)])
    rows.append(row("digest alone", mib, d, l_native,
                    f"{algorithm} (the store's per-file digest) of the bytes in memory vs plain "
                    f"read; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"))
    h = STAT([timed(lambda: hashlib.sha256(buf).hexdigest()) for _ in range(repeat)])
    rows.append(row("sha256 alone", mib, h, l_native,
                    f"reference: hashlib.sha256 (manifest v1's digest) of the bytes in memory vs "
                    f"plain read; load average {os.getloadavg()[0]:.1f}"))
    plain.unlink()
    return rows


_MOTO_PIDS: dict[str, int] = {}  # endpoint -> the moto server's pid (its CPU time is reported)


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        _MOTO_PIDS[endpoint] = proc.pid
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def _process_cpu(pid: int | None) -> float:
    """CPU seconds used so far by process ``pid`` (None: this one, all threads)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _S3Timer:
    """Wall seconds of each call, and the CPU seconds of this process and of the server."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.cpu: dict[str, list[tuple[float, float]]] = {}

    def __call__(self, side: str, fn: Callable[[], object]) -> float:
        c0, s0 = _process_cpu(None), _process_cpu(self.server_pid)
        t = timed(fn)
        self.cpu.setdefault(side, []).append(
            (_process_cpu(None) - c0, _process_cpu(self.server_pid) - s0)
        )
        return t

    def note(self, ours: str, native: str) -> str:
        def med(side: str) -> str:
            pairs = self.cpu.pop(side, [])
            if not pairs:
                return "-"
            client = statistics.median(p[0] for p in pairs)
            server = statistics.median(p[1] for p in pairs)
            return f"{client:.2f}+{server:.2f}"

        return f"CPU s client+server: interlock {med(ours)}, native {med(native)}"


def s3_rows(mib: int, repeat: int, endpoint: str) -> list[dict]:
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    from interlock.plugins.s3 import S3CheckpointStore

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")  # boto3's defaults
    bare = boto3.client(  # what the store uses with an endpoint_url and no setting
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=Config(request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"),
    )
    bucket = f"bench-{mib}"
    client.create_bucket(Bucket=bucket)
    config = TransferConfig()  # what a user gets by default
    data = os.urandom(mib * MiB)
    # The same CRC32 per part on the wire as upload_fileobj sends with boto3's defaults.
    store = S3CheckpointStore(bucket, "ckpts", endpoint_url=endpoint,
                              request_checksum_calculation="when_supported")
    ck = Checkpointer(store, f"bench/s3-{mib}/train", keep=2)
    ck.save(data, step=0)
    plain_ck = Checkpointer(S3CheckpointStore(bucket, "plain-ckpts", endpoint_url=endpoint),
                            f"bench/s3-{mib}/train", keep=2)
    plain_ck.save(data, step=0)
    step = iter(range(1, 1000))
    n = iter(range(1000))
    clock = _S3Timer(_MOTO_PIDS.get(endpoint))

    def save_with(c: Checkpointer) -> Callable[[], float]:
        def go() -> float:
            t = clock(f"ours {id(c)}", lambda: c.save(data, step=next(step)))
            c.flush()  # the prune runs after the commit, outside the save; let it end first
            return t
        return go

    def upload_with(c: object) -> Callable[[], float]:
        def go() -> float:
            key = f"plain/{next(n)}.bin"
            t = clock(f"native {id(c)}", lambda: c.upload_fileobj(io.BytesIO(data), bucket, key, Config=config))
            c.delete_object(Bucket=bucket, Key=key)  # as the store's keep=2 prunes its own
            return t
        return go

    rows = []
    s_ours, s_native = paired(save_with(ck), upload_with(client), repeat)
    rows.append(row("s3 save", mib, s_ours, s_native,
                    "Checkpointer.save(bytes), keep=2 vs upload_fileobj; both send a CRC32 per part; "
                    + clock.note(f"ours {id(ck)}", f"native {id(client)}")))
    s_ours, s_native = paired(save_with(plain_ck), upload_with(bare), repeat)
    rows.append(row("s3 save no CRC", mib, s_ours, s_native,
                    "the store's default with an endpoint_url vs upload_fileobj, no CRC sent; "
                    + clock.note(f"ours {id(plain_ck)}", f"native {id(bare)}")))
    client.upload_fileobj(io.BytesIO(data), bucket, "plain/read.bin", Config=config)
    data = b""  # free the state before the loads

    def ours_load() -> float:
        got = None

        def go() -> None:
            nonlocal got
            got = ck.load()

        t = clock("ours load", go)
        assert got is not None and len(got) == mib * MiB
        return t

    def native_load() -> float:
        got = None

        def go() -> None:
            nonlocal got
            got = client.get_object(Bucket=bucket, Key="plain/read.bin")["Body"].read()

        t = clock("native load", go)
        assert got is not None and len(got) == mib * MiB
        return t

    l_ours, l_native = paired(ours_load, native_load, repeat)
    rows.append(row("s3 load", mib, l_ours, l_native,
                    "Checkpointer.load() (digest verified) vs get_object().read() (boto3 checks "
                    "the CRC of a single-part object, not a multipart one's composite CRC); "
                    + clock.note("ours load", "native load")))
    if hasattr(ck, "open_read"):
        def ours_stream() -> float:
            def go() -> None:
                with ck.open_read(seekable=False) as f:
                    assert chunked_read(f) == mib * MiB

            return clock("ours stream", go)

        def native_stream() -> float:
            def go() -> None:
                body = client.get_object(Bucket=bucket, Key="plain/read.bin")["Body"]
                assert sum(len(c) for c in body.iter_chunks(CHUNK)) == mib * MiB

            return clock("native stream", go)

        st_ours, st_native = paired(ours_stream, native_stream, repeat)
        rows.append(row("s3 stream load", mib, st_ours, st_native,
                        "ck.open_read(seekable=False) in 8 MiB chunks vs get_object Body.iter_chunks; "
                        + clock.note("ours stream", "native stream")))
    rows[-1]["note"] += f"; load average {os.getloadavg()[0]:.1f}"
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256", help="MiB per state, comma-separated (1024 optional)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per figure: the median of the repeats, or the fastest")
    ap.add_argument("--no-s3", action="store_true", help="skip the S3 (moto) figures")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--workdir", type=Path, help="where local files go (default: a temp dir)")
    args = ap.parse_args()
    global STAT
    STAT = min if args.stat == "min" else statistics.median
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print("command: python benchmarks/checkpoint_speed.py " + " ".join(sys.argv[1:]))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="ckpt-bench-") as tmp:
        for mib in sizes:
            work = Path(tmp) / f"{mib}"
            work.mkdir()
            rows += local_rows(mib, args.repeat, work)
            shutil.rmtree(work)
    if not args.no_s3:
        with moto_server() as endpoint:
            for mib in sizes:
                rows += s3_rows(mib, args.repeat, endpoint)
    print(f"{'figure':<18} {'MiB':>5} {'interlock s':>12} {'native s':>10} {'ratio':>7}  note")
    for r in rows:
        native = f"{r['native_s']:.3f}" if r["native_s"] is not None else "-"
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        print(f"{r['figure']:<18} {r['size']:>5} {r['interlock_s']:>12.3f} {native:>10} {ratio:>7}  {r['note']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
