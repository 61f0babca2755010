"""What is under a data location now: ``Listed(uri, version)`` per object.

``OnData`` and ``OnDrift`` watch a prefix (a local folder, ``file://``, ``s3://bucket/p/``). A
listing names each object and a version that changes when its content is replaced (size and
mtime for a file, the ETag for an S3 object), so that a new object and a rewritten one each
start a run and an unchanged one never does. Other schemes come from plugins in the entry-point
group ``interlock.object_listers`` (by scheme), each an ``ObjectLister``.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from interlock.core.base import plugins
from interlock.core.base.errors import WatchError


@dataclass(frozen=True, order=True)
class Listed:
    """One object: its URI (what a run gets in ``uri_input``) and its version."""

    uri: str
    version: str


@runtime_checkable
class ObjectLister(Protocol):
    def list(self, uri: str, pattern: str) -> list[Listed]:
        """The objects under prefix ``uri`` whose name after the prefix matches the glob ``pattern``."""
        ...


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def local_path(uri: str) -> Path | None:
    """The local path ``uri`` names (a path or ``file://``), None for another scheme."""
    scheme = scheme_of(uri)
    if scheme == "":
        return Path(uri)
    if scheme == "file":
        return Path(unquote(urlsplit(uri).path))
    return None


class LocalLister:
    """Files under a folder (recursively) or one file; dotfiles (a writer's temporary) skipped."""

    def list(self, uri: str, pattern: str) -> list[Listed]:
        root = local_path(uri)
        if root is None:
            raise WatchError(f"{uri!r} is not a local path or file:// URI")
        try:
            if root.is_file():
                return [self._listed(root)]
            if not root.is_dir():
                return []  # not there yet: nothing has landed
            found = []
            for folder, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in files:
                    path = Path(folder) / name
                    if name.startswith(".") or not fnmatch.fnmatch(path.relative_to(root).as_posix(), pattern):
                        continue
                    found.append(self._listed(path))
            return sorted(found)
        except OSError as exc:
            raise WatchError(f"cannot list {uri}: {exc}", hint="check that the folder exists and is readable") from exc

    @staticmethod
    def _listed(path: Path) -> Listed:
        st = path.stat()
        return Listed(str(path.resolve()), f"{st.st_size}-{st.st_mtime_ns}")


def lister_for(uri: str) -> ObjectLister:
    """The lister of ``uri``'s scheme: built in for paths and file://, else a plugin."""
    if local_path(uri) is not None:
        return LocalLister()
    lister: ObjectLister = plugins.create(plugins.OBJECT_LISTERS, scheme_of(uri), ObjectLister, "ObjectLister")
    return lister


def list_objects(uri: str, pattern: str = "*") -> list[Listed]:
    """``uri``'s objects, oldest name first; a lister's own failure is a ``WatchError`` naming the URI."""
    lister = lister_for(uri)
    try:
        return sorted(lister.list(uri, pattern))
    except WatchError:
        raise
    except Exception as exc:  # a plugin's foreign error: say which location
        raise WatchError(f"cannot list {uri}: {type(exc).__name__}: {exc}",
                         hint="check the location and its credentials; the watcher tries again next poll") from exc
