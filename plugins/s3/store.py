"""``S3CheckpointStore``: the checkpoint store protocol on S3 (or MinIO, moto...) via boto3.

S3 has no rename, so the manifest object is the commit point (layout in ``layout.py``):

- save: list the key's objects and claim the next id above every id present with a
  ``claim`` object written with ``If-None-Match: *`` (a writer that loses the race moves
  on to the next id); upload the files under ``<id>/data/``, several at once (multipart
  through s3transfer for large ones), hashing exactly the bytes sent; check the claim is still ours; PUT the
  manifest, again conditionally. Only then does the checkpoint exist.
- load: list, newest id first; an id without a manifest is ignored; a manifest is checked
  (``decode_manifest``) and every file is streamed and verified against it.
- prune: delete the manifests first (each checkpoint is gone at once for every reader),
  then their data.
- leftovers of a killed writer (an id without a manifest) are ignored by readers and
  deleted by save, prune and ``cleanup`` once nothing under them changed for
  ``stale_after`` seconds (server time): S3 has no lock that would tell a dead writer from
  a slow live one.

Servers that refuse conditional writes (NotImplemented) are detected and handled by
reading the claim back after writing it; two writers of one key racing within one round
trip can then still collide, and the loser's checkpoint fails verification instead of
loading. AWS S3 (since 2024), MinIO and moto honour ``If-None-Match: *``.
"""

from __future__ import annotations

import builtins
import contextlib
import email.utils
import functools
import io
import json
import logging
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

from interlock.core.base.errors import CheckpointError
from interlock.core.checkpoint.manifest import (
    CheckpointInfo,
    FileEntry,
    FileSource,
    check_save_args,
    decode_manifest,
    encode_manifest,
    format_checkpoint_id,
    mismatch_error,
    parse_checkpoint_id,
)
from interlock.core.checkpoint.store import LoadedCheckpoint, newest_that_verifies

from .errors import S3StoreError, error_code, is_boto_error, is_missing, wrap
from .layout import CLAIM, MANIFEST, KeyLayout, normalise_prefix
from .spool import Spool
from .streams import Body, HashingReader, InMemory, check_regular_file, open_source
from .uri import display_endpoint, endpoint_from_env, parse_s3_uri

__all__ = ["S3CheckpointStore"]

log = logging.getLogger("interlock.checkpoint.s3")

MiB = 1 << 20
_RESCANS = 20
_CLAIM_TRIES = 50
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
_TAKEN = ("PreconditionFailed", "ConditionalRequestConflict")
_UNSUPPORTED = ("NotImplemented", "InvalidArgument", "InvalidRequest")
_MANIFEST_CACHE = 256
_UPLOAD_WINDOW = 32
_COMMIT_TRIES = 3  # saves that lost their id to another writer start over under a new one
_CHECKSUM_MODES = ("when_supported", "when_required")  # botocore's request_checksum_calculation
_LOST = ("ClaimLost", "IdTaken")  # files open and in flight at once within one save
T = TypeVar("T")


@dataclass
class _Entry:
    """What one id holds: its objects, whether it has a manifest and a claim."""

    id: str
    keys: list[str] = field(default_factory=list)
    manifest: bool = False
    manifest_etag: str | None = None
    claim: bool = False
    newest: float = 0.0  # LastModified of its newest object, seconds since the epoch
    sizes: dict[str, int] = field(default_factory=dict)  # object key -> size, as listed


class S3CheckpointStore:
    """A :class:`~interlock.core.checkpoint.checkpointer.CheckpointStore` on an S3 bucket.

    ``client``: a boto3 S3 client to use as is; otherwise one is made on first use, with
    ``endpoint_url`` (MinIO, moto; path-style addressing) and credentials from the
    standard AWS chain. ``stale_after``: seconds without activity after which an
    uncommitted checkpoint counts as abandoned and may be deleted. ``conditional_writes``:
    use ``If-None-Match: *`` (falls back by itself where the server refuses it).
    Files of ``multipart_threshold`` bytes or more are uploaded in parts. ``max_attempts``:
    tries of one request, the first included (botocore's standard retry mode). ``spool``: keep
    the files that a load verified in a temporary directory (under ``spool_dir``) while the
    loaded checkpoint is alive, so reading them does not download them a second time.
    ``request_checksum_calculation``: botocore's setting of that name. ``"when_supported"``
    (botocore's default, used on AWS) sends a CRC32 of every object and part, which the
    server checks on arrival, as ``upload_fileobj`` does; ``"when_required"`` only where
    the API demands one. Default: botocore's on AWS, ``"when_required"`` with an
    ``endpoint_url`` (some S3-compatible servers refuse the checksums) unless botocore's
    own setting says otherwise (``AWS_REQUEST_CHECKSUM_CALCULATION``). Either way every
    file is verified end to end against the manifest's digest when it is loaded.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        stale_after: float = 6 * 3600.0,
        conditional_writes: bool = True,
        multipart_threshold: int = 16 * MiB,
        multipart_chunksize: int = 16 * MiB,
        max_concurrency: int = 8,
        max_attempts: int = 5,
        spool: bool = True,
        spool_dir: str | os.PathLike | None = None,
        request_checksum_calculation: str | None = None,
    ) -> None:
        if request_checksum_calculation not in (None, *_CHECKSUM_MODES):
            raise CheckpointError(
                f"S3CheckpointStore request_checksum_calculation must be one of {_CHECKSUM_MODES} "
                f"or None, got {request_checksum_calculation!r}"
            )
        self.bucket, _ = parse_s3_uri(f"s3://{bucket}")
        self.prefix = normalise_prefix(prefix)
        self.endpoint_url = endpoint_url or None
        self.stale_after = float(stale_after)
        self.conditional_writes = conditional_writes
        self.multipart_threshold = multipart_threshold
        self.multipart_chunksize = multipart_chunksize
        self.max_concurrency = max_concurrency
        self.max_attempts = max_attempts
        self.spool = spool
        self.spool_dir = spool_dir
        self.request_checksum_calculation = request_checksum_calculation
        self._client = client
        self._transfer: Any = None
        self._lock = threading.Lock()
        self._manifests: dict[str, tuple[str, bytes]] = {}  # object key -> (ETag, bytes)

    @classmethod
    def from_uri(cls, uri: str, endpoint_url: str | None = None, **options: Any) -> S3CheckpointStore:
        """A store for ``s3://bucket/prefix``; the endpoint defaults to the environment's
        ``INTERLOCK_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL`` (else AWS itself)."""
        bucket, prefix = parse_s3_uri(uri)
        return cls(bucket, prefix, endpoint_url=endpoint_url or endpoint_from_env(), **options)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        at = f", endpoint_url={display_endpoint(self.endpoint_url)!r}" if self.endpoint_url else ""
        return f"S3CheckpointStore({self.uri!r}{at})"

    # --- boto3 plumbing ---

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise CheckpointError(
                "the S3 checkpoint store needs boto3",
                hint="pip install 'interlock[s3]'",
            ) from exc
        options: dict[str, Any] = {
            "retries": {"mode": "standard", "total_max_attempts": self.max_attempts},
            "max_pool_connections": max(10, self.max_concurrency + 2),
        }
        session = _session(boto3)
        if self.endpoint_url:
            options["s3"] = {"addressing_style": "path"}  # MinIO, moto: no bucket subdomains
            # botocore's default CRC trailers (since 1.36) are refused by some S3-compatible
            # servers; integrity does not rest on them (every file is verified against the
            # manifest's digest), so they are only sent on request: this store's setting,
            # or botocore's own (AWS_REQUEST_CHECKSUM_CALCULATION, the profile's setting).
            for name in ("request_checksum_calculation", "response_checksum_validation"):
                if not _configured(session, name):
                    options[name] = "when_required"
        if self.request_checksum_calculation:
            options["request_checksum_calculation"] = self.request_checksum_calculation
        return session.client("s3", endpoint_url=self.endpoint_url, config=Config(**options))

    def _transfer_config(self) -> Any:
        if self._transfer is None:
            from boto3.s3.transfer import TransferConfig

            self._transfer = TransferConfig(
                multipart_threshold=self.multipart_threshold,
                multipart_chunksize=self.multipart_chunksize,
                max_concurrency=self.max_concurrency,
                # s3transfer itself (not the CRT client): it reads our non-seekable
                # hashing readers once, in order, which the file digest relies on.
                preferred_transfer_client="classic",
            )
        return self._transfer

    def _where(self, object_key: str) -> str:
        return f"s3://{self.bucket}/{object_key}"

    def _wrap(self, exc: BaseException, operation: str, object_key: str) -> S3StoreError:
        return wrap(
            exc,
            operation=operation,
            where=self._where(object_key),
            endpoint=display_endpoint(self.endpoint_url),
        )

    def _call(self, operation: str, object_key: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:
            if is_boto_error(exc):
                raise self._wrap(exc, operation, object_key) from exc
            raise

    def _layout(self, key: str) -> KeyLayout:
        layout = KeyLayout(self.prefix, key)
        _ = layout.root  # validates the key and its length now
        return layout

    # --- listing and small objects ---

    def _list(self, prefix: str, delimiter: str | None) -> tuple[list[dict], list[str], float]:
        """Objects and common prefixes under ``prefix``, and the server's clock."""
        objects: list[dict] = []
        prefixes: list[str] = []
        now: float | None = None

        def run() -> None:
            nonlocal now
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if delimiter:
                kwargs["Delimiter"] = delimiter
            for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
                if now is None:
                    now = _server_time(page)
                objects.extend(page.get("Contents", []))
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))

        self._call("ListObjectsV2", prefix, run)
        return objects, prefixes, now if now is not None else time.time()

    def _scan(self, layout: KeyLayout) -> tuple[dict[int, _Entry], float]:
        """Every id present for the key (committed or not), oldest first, with its
        objects; and the server's clock. One request unless there are over 1000 objects."""
        objects, _, now = self._list(layout.root, None)
        entries: dict[int, _Entry] = {}
        for obj in objects:
            cid, sep, rest = obj["Key"][len(layout.root) :].partition("/")
            seq = parse_checkpoint_id(cid)
            if seq is None or not sep:
                continue  # not written by this store
            entry = entries.setdefault(seq, _Entry(cid))
            entry.keys.append(obj["Key"])
            entry.sizes[obj["Key"]] = obj.get("Size", -1)
            if rest == MANIFEST:
                entry.manifest, entry.manifest_etag = True, obj.get("ETag")
            entry.claim = entry.claim or rest == CLAIM
            entry.newest = max(entry.newest, obj["LastModified"].timestamp())
        return dict(sorted(entries.items())), now

    def _get(self, object_key: str) -> bytes | None:
        """The object's bytes, or None when there is none."""
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=object_key)
            return response["Body"].read()
        except Exception as exc:
            if is_boto_error(exc):
                if is_missing(exc):
                    return None
                raise self._wrap(exc, "GetObject", object_key) from exc
            raise

    def _manifest_bytes(self, layout: KeyLayout, entry: _Entry) -> bytes | None:
        """The manifest of ``entry`` (None: gone). Manifests never change once written, and
        a rewritten object gets a new ETag, so one seen under the listed ETag is reused."""
        object_key = layout.manifest(entry.id)
        with self._lock:
            cached = self._manifests.get(object_key)
        if cached is not None and entry.manifest_etag and cached[0] == entry.manifest_etag:
            return cached[1]
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=object_key)
            data = response["Body"].read()
        except Exception as exc:
            if is_boto_error(exc):
                if is_missing(exc):
                    return None
                raise self._wrap(exc, "GetObject", object_key) from exc
            raise
        if response.get("ETag"):
            self._remember(object_key, response["ETag"], data)
        return data

    def _exists(self, object_key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=object_key)
            return True
        except Exception as exc:
            if is_boto_error(exc):
                if is_missing(exc):
                    return False
                raise self._wrap(exc, "HeadObject", object_key) from exc
            raise

    def _remember(self, object_key: str, etag: str, data: bytes) -> None:
        with self._lock:
            self._manifests.pop(object_key, None)
            self._manifests[object_key] = (etag, data)
            while len(self._manifests) > _MANIFEST_CACHE:
                self._manifests.pop(next(iter(self._manifests)))

    def _put_if_absent(self, object_key: str, body: bytes, *, remember: bool = False) -> bool:
        """PUT unless the object exists; False when it does (another writer was first).
        ``remember``: cache the body under the ETag the server gave it."""
        extra = {"IfNoneMatch": "*"} if self.conditional_writes else {}
        if not self.conditional_writes and self._exists(object_key):
            return False  # the same check, not atomic: the read-back after it narrows the race
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=object_key, Body=body, **extra
            )
            if remember and response.get("ETag"):
                self._remember(object_key, response["ETag"], body)
            return True
        except Exception as exc:
            if not is_boto_error(exc):
                raise
            code = error_code(exc)
            if code in _TAKEN:
                return False
            if self.conditional_writes and code in _UNSUPPORTED:
                log.info(
                    "S3 endpoint refused a conditional write (%s); falling back to read-back checks",
                    code,
                )
                self.conditional_writes = False
                return self._put_if_absent(object_key, body, remember=remember)
            raise self._wrap(exc, "PutObject", object_key) from exc

    def _delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            request = {"Objects": [{"Key": k} for k in batch], "Quiet": True}
            response: dict[str, Any] = self._call(
                "DeleteObjects",
                batch[0],
                functools.partial(self.client.delete_objects, Bucket=self.bucket, Delete=request),
            )
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise S3StoreError(
                    f"S3 DeleteObjects on {self._where(first.get('Key', '?'))} failed: "
                    f"{first.get('Code')}: {first.get('Message', '')} ({len(errors)} object(s) not deleted)",
                    s3_code=str(first.get("Code")),
                    retryable=first.get("Code") in ("SlowDown", "InternalError", "ServiceUnavailable"),
                )

    # --- save ---

    def save(
        self,
        key: str,
        files: Mapping[str, FileSource],
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        layout = self._layout(key)
        meta = check_save_args(key, files, step, metadata)  # before uploading gigabytes, not after
        for name, src in files.items():
            layout.data(format_checkpoint_id(1), name)  # object key length, checked up front
            if isinstance(src, os.PathLike):
                check_regular_file(key, name, src)

        entries, now = self._scan(layout)
        self._clean(layout, entries, now, self.stale_after)
        seq = max(entries, default=0) + 1
        for attempt in range(1, _COMMIT_TRIES + 1):
            try:
                return self._save_as(layout, seq, files, step, meta)
            except S3StoreError as exc:
                if exc.s3_code not in _LOST or attempt == _COMMIT_TRIES:
                    raise
                log.info("checkpoint save of key %r: %s; saving again under a new id", key, exc.message)
                entries, _ = self._scan(layout)
                seq = max(entries, default=0) + 1
        raise AssertionError("unreachable")  # pragma: no cover

    def _save_as(
        self,
        layout: KeyLayout,
        seq: int,
        files: Mapping[str, FileSource],
        step: int | None,
        meta: dict[str, Any],
    ) -> CheckpointInfo:
        """Claim id ``seq`` (or the next free one), upload, commit."""
        key = layout.key
        cid, token = self._claim(layout, seq)
        written = [layout.claim(cid)]
        owned = True
        try:
            written += [layout.data(cid, name) for name in sorted(files)]
            files_done = self._upload_all(key, layout, cid, files)
            info = CheckpointInfo(
                key=key,
                id=cid,
                step=step,
                created_at=time.time(),
                files=files_done,
                metadata=meta,
            )
            manifest = encode_manifest(info)
            # A cleanup that took this writer for dead deletes the claim first; without
            # conditional writes, a racing writer may have overwritten it: give up the id.
            if self._claim_token(layout, cid) != token:
                owned = False
                raise S3StoreError(
                    f"checkpoint {cid} of key {key!r}: lost the claim on this id before committing "
                    "(another writer or a cleanup took it)",
                    s3_code="ClaimLost",
                    retryable=True,
                    hint="another attempt of this step may be running; the save was not committed",
                )
            if not self._put_if_absent(layout.manifest(cid), manifest, remember=True):  # commit
                owned = False
                raise S3StoreError(
                    f"checkpoint {cid} of key {key!r} was committed by another writer first",
                    s3_code="IdTaken",
                    retryable=True,
                    hint="another attempt of this step may be running",
                )
        except BaseException:
            if owned:
                with contextlib.suppress(Exception):
                    self._delete(written[1:] + written[:1])  # data, then the claim
            raise
        # The claim stays beside the manifest (who wrote it, when); prune removes both.
        return info

    def _claim(self, layout: KeyLayout, seq: int) -> tuple[str, str]:
        """Claim id ``seq`` or the next free one above it; ``(id, token)``."""
        token = secrets.token_hex(16)
        body = json.dumps({"token": token, "pid": os.getpid(), "created_at": time.time()}).encode()
        for _ in range(_CLAIM_TRIES):
            cid = format_checkpoint_id(seq)
            if self._put_if_absent(layout.claim(cid), body) and (
                self.conditional_writes or self._claim_token(layout, cid) == token
            ):
                return cid, token
            entries, _ = self._scan(layout)  # taken: go above everything present now
            seq = max(seq, *entries) + 1 if entries else seq + 1
        raise S3StoreError(
            f"could not claim a checkpoint id for key {layout.key!r} after {_CLAIM_TRIES} tries",
            s3_code="ClaimContention",
            retryable=True,
            hint="too many concurrent writers of one key",
        )

    def _claim_token(self, layout: KeyLayout, cid: str) -> str | None:
        data = self._get(layout.claim(cid))
        if data is None:
            return None
        try:
            return json.loads(data).get("token")
        except (ValueError, AttributeError):
            return None

    def _upload_all(
        self, key: str, layout: KeyLayout, cid: str, files: Mapping[str, FileSource]
    ) -> dict[str, FileEntry]:
        """Upload every file under checkpoint ``cid``; each file's digest and size as sent.

        One transfer manager for the whole save, so many small files (a sharded model) go
        up concurrently; a bounded window of them is open at a time. Large files go up in
        parts (``upload_fileobj``'s machinery: s3transfer with our TransferConfig).
        """
        from boto3.s3.transfer import create_transfer_manager

        done: dict[str, FileEntry] = {}
        names = sorted(files)
        opened: list[BinaryIO] = []
        try:
            with create_transfer_manager(self.client, self._transfer_config()) as manager:
                for start in range(0, len(names), _UPLOAD_WINDOW):
                    window: list[tuple[str, str, HashingReader | InMemory, Any]] = []
                    for name in names[start : start + _UPLOAD_WINDOW]:
                        source = files[name]
                        object_key = layout.data(cid, name)
                        if isinstance(source, bytes | bytearray | memoryview):
                            # A snapshot (free for bytes) cannot change under us: uploaded as
                            # upload_fileobj would (seekable), hashed beside it on a worker.
                            data = bytes(source)
                            reader: HashingReader | InMemory = InMemory(data)
                            future = manager.upload(io.BytesIO(data), self.bucket, object_key)
                        else:
                            stream = open_source(key, name, source)
                            opened.append(stream)
                            reader = HashingReader(stream)  # a file: hash exactly what is sent
                            future = manager.upload(reader, self.bucket, object_key)
                        window.append((name, object_key, reader, future))
                    for name, object_key, reader, future in window:
                        self._finish_upload(key, name, object_key, future)
                        done[name] = reader.entry()
                    for stream in opened:  # every upload of the window is complete
                        stream.close()
                    opened.clear()
        finally:
            # After the manager's exit, which cancels and waits for uploads still running.
            for stream in opened:
                stream.close()
        return done

    def _finish_upload(self, key: str, name: str, object_key: str, future: Any) -> None:
        try:
            future.result()
        except Exception as exc:
            if is_boto_error(exc):
                raise self._wrap(exc, "Upload", object_key) from exc
            if isinstance(exc, OSError):
                raise CheckpointError(
                    f"cannot save a checkpoint of key {key!r}: reading file {name!r} failed: {exc}"
                ) from exc
            raise

    # --- load and list ---

    def load_latest(
        self, key: str, *, fallback: bool = False, verify: bool = True
    ) -> LoadedCheckpoint | None:
        layout = self._layout(key)
        # A prune deletes the manifest first: a candidate whose manifest is gone vanished (a
        # newer one was committed first), and the shared scan lists again. Ids without a
        # manifest are not committed and never candidates.
        return newest_that_verifies(
            key,
            lambda: [e for e in self._scan(layout)[0].values() if e.manifest],
            lambda entry: self._load_verified(layout, entry, verify),
            lambda entry: self._get(layout.manifest(entry.id)) is None,
            fallback=fallback,
            rescans=_RESCANS,
            churn=lambda: _churn_error(key),
            service_errors=(S3StoreError,),  # the service failed: no evidence of corruption
        )

    def _load_verified(
        self, layout: KeyLayout, entry: _Entry, verify: bool = True
    ) -> LoadedCheckpoint | None:
        """Checkpoint ``entry`` verified; None when its manifest is gone since the listing.
        ``verify=False``: every file listed with its size; contents checked as read, each
        file downloaded once by the read that uses it (no spool needed)."""
        data = self._manifest_bytes(layout, entry)
        if data is None:
            return None
        info = decode_manifest(data, key=layout.key, checkpoint_id=entry.id)
        if not verify:
            for name, file_entry in info.files.items():
                size = entry.sizes.get(layout.data(entry.id, name))
                if size is None:
                    raise mismatch_error(info, name, "file is missing")
                if size > file_entry.size:
                    raise mismatch_error(info, name, f"longer than {file_entry.size} bytes")
                if size != file_entry.size:
                    raise mismatch_error(info, name, f"size expected {file_entry.size}, got {size}")
            return LoadedCheckpoint(info, self._opener(layout, info, None), verified=False)
        spool = Spool(self.spool_dir) if self.spool else None
        loaded = LoadedCheckpoint(info, self._opener(layout, info, spool), verified=True)
        if spool is not None:
            weakref.finalize(loaded, spool.cleanup)
        try:
            loaded.verify()
        except BaseException:
            if spool is not None:
                spool.cleanup()
            raise
        return loaded

    def _opener(
        self, layout: KeyLayout, info: CheckpointInfo, spool: Spool | None
    ) -> Callable[[str], Any]:
        def open_file(name: str) -> Any:
            local = spool.local(name) if spool is not None else None
            if local is not None:
                with contextlib.suppress(OSError):
                    return open(local, "rb")  # noqa: SIM115 - the caller closes it
            object_key = layout.data(info.id, name)
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=object_key)
            except Exception as exc:
                if not is_boto_error(exc):
                    raise
                if is_missing(exc):
                    raise mismatch_error(info, name, "file is missing") from exc
                raise self._wrap(exc, "GetObject", object_key) from exc
            body: Any = Body(response["Body"], lambda exc: self._wrap(exc, "GetObject", object_key))
            if spool is not None:
                with contextlib.suppress(OSError):
                    body = spool.tee(name, body)
            return contextlib.closing(body)

        return open_file

    def list(self, key: str) -> list[CheckpointInfo]:
        layout = self._layout(key)
        for _ in range(_RESCANS):
            listed = self._committed(layout, self._scan(layout)[0])
            if listed is not None:
                return [info for info in listed.values() if info is not None]
        raise _churn_error(key)

    def _committed(
        self, layout: KeyLayout, entries: dict[int, _Entry]
    ) -> dict[int, CheckpointInfo | None] | None:
        """Decoded manifests by id (None: invalid), oldest first; None if one vanished."""
        out: dict[int, CheckpointInfo | None] = {}
        for seq, entry in entries.items():
            if not entry.manifest:
                continue
            data = self._manifest_bytes(layout, entry)
            if data is None:
                return None  # pruned since the listing: a newer one may have come
            try:
                out[seq] = decode_manifest(data, key=layout.key, checkpoint_id=entry.id)
            except CheckpointError as exc:
                log.warning("ignoring checkpoint with an invalid manifest: %s", exc.message)
                out[seq] = None
        return out

    # --- prune and cleanup ---

    def prune(self, key: str, keep: int) -> builtins.list[CheckpointInfo]:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
            raise CheckpointError(f"prune keep must be an int >= 0, got {keep!r}")
        layout = self._layout(key)
        entries, now = self._scan(layout)
        self._clean(layout, entries, now, self.stale_after)
        committed = self._committed(layout, entries) or {}  # a vanished one: pruned already
        valid = [info for info in committed.values() if info is not None]
        kept = valid[-keep:] if keep else []
        doomed = valid[: len(valid) - len(kept)]
        targets = [info.sequence for info in doomed]
        # A manifest that does not decode, older than what is kept, goes too (as locally).
        kept_from = kept[0].sequence if kept else (None if keep else float("inf"))
        if kept_from is not None:
            targets += [seq for seq, info in committed.items() if info is None and seq < kept_from]
        if targets:
            # Manifests first, in their own request: each checkpoint is gone for every
            # reader before any of its data is; a prune killed half-way leaves only data.
            manifests = [layout.manifest(entries[seq].id) for seq in targets]
            self._delete(manifests)
            self._delete([k for seq in targets for k in entries[seq].keys if k not in manifests])
        return doomed

    def cleanup(self, key: str, *, older_than: float | None = None) -> builtins.list[str]:
        """Delete uncommitted checkpoints (no manifest) idle for ``older_than`` seconds
        (default ``stale_after``; 0: all, for when no writer of the key can be running).
        Returns their ids."""
        layout = self._layout(key)
        entries, now = self._scan(layout)
        return self._clean(layout, entries, now, self.stale_after if older_than is None else older_than)

    def _clean(
        self, layout: KeyLayout, entries: dict[int, _Entry], now: float, older_than: float
    ) -> builtins.list[str]:
        removed = []
        for entry in entries.values():
            if entry.manifest:
                continue  # committed
            if older_than > 0 and now - entry.newest < older_than:
                continue  # maybe a live writer, still uploading
            # The claim goes first: a live writer checks it before committing and gives up.
            claim = layout.claim(entry.id)
            if entry.claim:
                self._delete([claim])
            if self._get(layout.manifest(entry.id)) is not None:
                continue  # it committed after all
            self._delete([k for k in entry.keys if k != claim])
            removed.append(entry.id)
        if removed:
            log.info(
                "removed %d abandoned checkpoint write(s) of key %r in %s",
                len(removed),
                layout.key,
                self.uri,
            )
        return removed


def _churn_error(key: str) -> S3StoreError:
    return S3StoreError(
        f"checkpoints of key {key!r} kept vanishing while being read",
        s3_code="Churn",
        retryable=True,
    )


_LOADER: Any = None
_LOADER_LOCK = threading.Lock()


def _session(boto3: Any) -> Any:
    """A new boto3 session (credentials resolved afresh by the standard chain) that shares
    one loader of service models: parsing S3's model costs ~0.2 s per session otherwise."""
    global _LOADER
    import botocore.session
    from botocore.loaders import create_loader

    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = create_loader()
        core = botocore.session.get_session()
        core.register_component("data_loader", _LOADER)
        session = boto3.session.Session(botocore_session=core)
        # Each boto3 session appends its data path to the loader: keep the list from growing.
        _LOADER.search_paths[:] = list(dict.fromkeys(_LOADER.search_paths))
    return session


def _configured(session: Any, name: str) -> bool:
    """Whether the user set botocore's ``name`` (its environment variable or the profile)."""
    if os.environ.get(f"AWS_{name.upper()}"):
        return True
    try:
        return bool(session._session.get_scoped_config().get(name))
    except Exception:  # noqa: BLE001 - no readable profile: not set there
        return False


def _server_time(page: dict[str, Any]) -> float | None:
    date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        return None
    try:
        return email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
