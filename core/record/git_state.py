"""The receipt's git facts read from the repository's files, as git itself reads them.

``git rev-parse`` and ``git status`` cost three processes per run (4-7 ms of CPU, more than
the rest of a cached rerun). Most runs happen in a clean checkout, and git's own answer to
"is it clean?" is a stat comparison: every index entry whose file's lstat still matches the
stat data the index recorded (and is not racily newer than the index) is unchanged, and the
index equals HEAD when its cache tree's root (the TREE extension) is HEAD's tree. This module
does exactly that, in Python, and answers only what it can prove:

- ``Probe.sha``: HEAD resolved through the ref files (loose, then packed-refs);
- ``Probe.clean``: True only when every entry matches its file (no racy entry), the index's
  root tree is HEAD's tree and every given source file is tracked. Anything else (a stat
  mismatch, a missing file, an unmerged, skip-worktree or intent-to-add entry, a submodule,
  index v4, a split or sparse index, a SHA-256 repository, an object it cannot read without
  deltas) leaves ``clean`` None, and the caller asks git, which then also hashes contents.

Nothing is cached across runs except what cannot go stale: a parsed index keyed on the index
file's identity (git replaces the index by rename, so any change is a new inode), and a
commit's tree keyed on the commit's SHA (content-addressed). The stat of every tracked file
is taken at each call, so a file edited between two runs is seen, as git sees it.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Environment that changes where git finds the repository, index, objects, refs or config:
# with any of these set, only git knows (GIT_CONFIG_KEY_n counts only with GIT_CONFIG_COUNT).
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_NAMESPACE",
            "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_NOSYSTEM", "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS", "GIT_TEST_ASSUME_DIFFERENT_OWNER")
# Repository config that moves the work tree or changes formats: leave those to git.
_CONFIG_TOKENS = (b"worktree", b"objectformat", b"refstorage", b"bare=true", b"[include", b"splitindex",
                  b"sparsecheckout")
_HEX = frozenset("0123456789abcdef")
_MAX_ENTRIES = 50_000  # beyond this, git's own status (parallel stat, fsmonitor) is the better judge
_ENTRY = struct.Struct(">10I20sH")  # ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size; sha; flags


@dataclass(frozen=True)
class Probe:
    top: Path  # the work tree's root (where .git is)
    sha: str | None  # HEAD's commit, None when it could not be read from the files
    clean: bool | None  # True: proven clean as git would say; None: ask git
    tracked: frozenset[str] | None  # the index's paths (stage 0), None when it was not read


@dataclass(frozen=True)
class _Index:
    entries: tuple[tuple[str, tuple[int, ...]], ...]  # (path, the lstat it recorded: _stat_key), stage 0
    paths: frozenset[str]
    root_tree: str | None  # the cache tree's root, None when invalid or absent
    plain: bool  # no entry or extension that git treats specially
    racy: bool  # an entry's file changed no earlier than the index was written


_INDEX_CACHE: dict[tuple[str, int, int, int, int], _Index | None] = {}
_TREE_OF: dict[str, str] = {}  # commit SHA -> tree SHA: a SHA names its content, never stale


def probe(start: Path | str, files: Iterable[Path | str] = ()) -> Probe | None:
    """What the repository's files say about the work tree holding ``start``; None where git's
    own discovery could differ (environment, ownership, unusual layouts): then ask git."""
    environ = os.environ
    if any(k in environ for k in _GIT_ENV):
        return None
    try:
        return _probe(os.path.realpath(start), files)
    except (OSError, ValueError, struct.error, zlib.error, UnicodeDecodeError):
        return None


# Paths here are strings (os.path), not pathlib: this runs once a run, and pathlib's parsing
# cost as much as the reads.
def _probe(start: str, files: Iterable[Path | str]) -> Probe | None:
    if ".git" in start.split(os.sep):
        return None  # inside a git directory: git answers differently
    found = _find_top(start)
    if found is None:
        return None
    top, gitdir = found
    common = gitdir
    try:  # a linked worktree: refs, objects and config are shared with the main one
        common = os.path.realpath(os.path.join(gitdir, _read(os.path.join(gitdir, "commondir")).decode().strip()))
    except FileNotFoundError:
        pass
    config = _read(os.path.join(common, "config")).lower().replace(b" ", b"").replace(b"\t", b"")
    replace = os.path.join(common, "refs", "replace")
    if any(t in config for t in _CONFIG_TOKENS) or os.path.isdir(replace) and os.listdir(replace):
        return None
    sha = _head(gitdir, common)
    if sha is None:
        return Probe(Path(top), None, None, None)
    index = _read_index(os.path.join(gitdir, "index"))
    if index is None:
        return Probe(Path(top), sha, None, None)
    prefix = top.rstrip(os.sep) + os.sep
    ours = [real[len(prefix):].replace(os.sep, "/") for real in map(os.path.realpath, files) if real.startswith(prefix)]
    clean = (index.plain and all(p in index.paths for p in ours) and index.root_tree is not None
             and index.root_tree == _tree_of(common, sha) and _worktree_matches(prefix, index))
    return Probe(Path(top), sha, True if clean else None, index.paths)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _find_top(start: str) -> tuple[str, str] | None:
    """git's discovery: the nearest folder up from ``start`` holding ``.git`` (a folder, or a
    file naming one), on the same file system, owned by us."""
    dev = os.stat(start).st_dev
    d = start
    while True:
        dot = os.path.join(d, ".git")
        try:
            st = os.stat(dot)
        except FileNotFoundError:
            parent = os.path.dirname(d)
            if parent == d or os.stat(parent).st_dev != dev:
                return None  # the root, or a file system boundary, where git stops too
            d = parent
            continue
        geteuid = getattr(os, "geteuid", None)  # POSIX; elsewhere git decides
        if geteuid is None or os.stat(d).st_uid != geteuid():
            return None  # git's safe.directory rule may refuse it
        if stat.S_ISDIR(st.st_mode):
            return d, dot
        text = _read(dot).decode().strip()
        if not text.startswith("gitdir: "):
            return None
        return d, os.path.realpath(os.path.join(d, text[len("gitdir: "):]))


def _head(gitdir: str, common: str) -> str | None:
    ref = "HEAD"
    for _ in range(5):
        try:
            text = _read(os.path.join(gitdir if ref == "HEAD" else common, ref)).decode().strip()
        except (FileNotFoundError, NotADirectoryError):
            text = _packed(common, ref)
            if text is None:
                return None  # unborn branch, reftable, or a ref git knows another way
        if text.startswith("ref: "):
            ref = text[5:]
            if not ref.startswith("refs/") or ".." in ref:
                return None
            continue
        return text if len(text) == 40 and set(text) <= _HEX else None
    return None


def _packed(common: str, ref: str) -> str | None:
    try:
        lines = _read(os.path.join(common, "packed-refs")).decode().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        if line and line[0] not in "#^":
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha
    return None


def _read_index(path: str) -> _Index | None:
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _INDEX_CACHE:
        if len(_INDEX_CACHE) > 16:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = _parse_index(_read(path), st.st_mtime_ns)
    return _INDEX_CACHE[key]


def _parse_index(data: bytes, written_ns: int) -> _Index | None:
    if data[:4] != b"DIRC":
        return None
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3) or count > _MAX_ENTRIES:
        return None  # v4 compresses paths (rare); a huge tree is git's, with its threads and fsmonitor
    pos, end = 12, len(data) - 20
    entries: list[tuple[str, tuple[int, ...]]] = []
    plain = True
    for _ in range(count):
        *words, _sha, flags = _ENTRY.unpack_from(data, pos)
        head = 62
        if flags & 0x4000:  # extended flags (skip-worktree, intent-to-add): git's business
            if version < 3:
                return None
            plain = False
            head += 2
        nul = data.index(b"\0", pos + head)
        name = data[pos + head:nul].decode("utf-8", "surrogateescape")
        pos += (nul - pos + 8) & ~7  # the entry and its 1-8 NUL bytes of padding
        if flags & 0x8000 or (flags >> 12) & 3 or words[6] & 0o170000 not in (0o100000, 0o120000):
            plain = False  # assume-valid, an unmerged stage, a submodule
        if not (flags >> 12) & 3:
            entries.append((name, _recorded(words)))
    root_tree = None
    while pos + 8 <= end:
        sig, size = data[pos:pos + 4], struct.unpack_from(">I", data, pos + 4)[0]
        body = data[pos + 8:pos + 8 + size]
        if sig == b"TREE" and body[:1] == b"\0":
            counts, _, rest = body[1:].partition(b"\n")
            if int(counts.split(b" ")[0]) >= 0:
                root_tree = rest[:20].hex()
        elif not sig[:1].isupper():
            plain = False  # a mandatory extension (split index "link", sparse "sdir")
        pos += 8 + size
    # git's racy-timestamp rule: a file modified no earlier than the index was written may
    # have changed again in that same instant without its stat showing it; git hashes it.
    racy = any(want[0] >= written_ns for _, want in entries)
    return _Index(tuple(entries), frozenset(n for n, _ in entries), root_tree, plain, racy)


_MASK = 0xFFFFFFFF  # the index keeps the low 32 bits of inode and size
_KIND = 0o170000 | 0o100  # file type and owner-exec bit: what git's mode records


def _recorded(w: list[int]) -> tuple[int, ...]:
    """An index entry's stat words as ``_stat_key`` of an unchanged file gives them (git's
    ce_match_stat: mtime and ctime to the nanosecond, inode, owner, group, size, type and
    executable bit). A symlink's own mode is 0777 on Linux, so its exec bit is set."""
    kind = w[6] & 0o170000
    mode = kind | (0o100 if kind == 0o120000 else w[6] & 0o100)
    return (w[2] * 10**9 + w[3], w[0] * 10**9 + w[1], w[5], w[7], w[8], w[9], mode)


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino & _MASK, st.st_uid, st.st_gid, st.st_size & _MASK,
            st.st_mode & _KIND)


def _worktree_matches(base: str, index: _Index) -> bool:
    """Every entry's file has the lstat the index recorded for it (``_stat_key``, inlined:
    this loop is most of a clean probe), and none is racy."""
    if index.racy:
        return False
    lstat, mask, kind = os.lstat, _MASK, _KIND
    try:
        for name, want in index.entries:
            st = lstat(base + name)
            if (st.st_mtime_ns, st.st_ctime_ns, st.st_ino & mask, st.st_uid, st.st_gid, st.st_size & mask,
                    st.st_mode & kind) != want:
                return False
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def _tree_of(common: str, commit: str) -> str | None:
    if commit not in _TREE_OF:
        raw = _read_commit(Path(common) / "objects", commit)
        if raw is None or not raw.startswith(b"tree ") or len(raw) < 45:
            return None
        _TREE_OF[commit] = raw[5:45].decode()
    return _TREE_OF[commit]


def _read_commit(objects: Path, sha: str) -> bytes | None:
    """The start of a commit's body: a loose object, or a whole (undeltified) one in a pack."""
    loose = objects / sha[:2] / sha[2:]
    if loose.is_file():
        data = zlib.decompressobj().decompress(loose.read_bytes(), 256)
        header, _, body = data.partition(b"\0")
        return body if header.startswith(b"commit ") else None
    want = bytes.fromhex(sha)
    packs = objects / "pack"
    for idx in packs.glob("*.idx") if packs.is_dir() else ():
        offset = _pack_offset(idx, want)
        if offset is None:
            continue
        with open(idx.with_suffix(".pack"), "rb") as fh:
            fh.seek(offset)
            chunk = fh.read(512)
        kind = (chunk[0] >> 4) & 7
        i = 0
        while chunk[i] & 0x80:
            i += 1
        if kind != 1:
            return None  # deltified (or not a commit): git knows
        return zlib.decompressobj().decompress(chunk[i + 1:], 256)
    return None


def _pack_offset(idx: Path, want: bytes) -> int | None:
    with open(idx, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _idx_lookup(data, want)  # mapped: a big repository's index is tens of MB


def _idx_lookup(data: mmap.mmap, want: bytes) -> int | None:
    if data[:8] != b"\377tOc\0\0\0\2":
        return None
    first = want[0]
    lo = struct.unpack_from(">I", data, 8 + 4 * (first - 1))[0] if first else 0
    hi = struct.unpack_from(">I", data, 8 + 4 * first)[0]
    total = struct.unpack_from(">I", data, 8 + 4 * 255)[0]
    names = 8 + 256 * 4
    while lo < hi:
        mid = (lo + hi) // 2
        got = data[names + 20 * mid:names + 20 * mid + 20]
        if got == want:
            offsets = names + 24 * total  # after the names and the CRCs
            off = struct.unpack_from(">I", data, offsets + 4 * mid)[0]
            if off & 0x80000000:
                large = offsets + 4 * total + 8 * (off & 0x7FFFFFFF)
                off = struct.unpack_from(">Q", data, large)[0]
            return off
        if got < want:
            lo = mid + 1
        else:
            hi = mid
    return None
