"""Artifact trees for `FsspecArtifactStore`: local copies, object listings and their signatures."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from typing import Any

from headwater.artifacts.base import new_hash
from headwater.errors import StorageError

#: Fields of an object's listing that change whenever it is written, best first.
VERSION_FIELDS = ("ETag", "etag", "generation", "VersionId", "md5Hash", "LastModified",
                  "mtime", "updated", "created")  # fmt: skip


def _walk_order(relpath: str) -> list[tuple[int, str]]:
    # os.walk with sorted names visits a directory's files before its subdirectories.
    parts = relpath.split("/")
    return [(1, p) for p in parts[:-1]] + [(0, parts[-1])]


def remote_files(fs: Any, path: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(relative path, full path, info) of every object under `path`, in digest order."""
    prefix = path.rstrip("/") + "/"
    found: dict[str, dict[str, Any]] = fs.find(path, detail=True)
    files = [
        (p[len(prefix) :], p, info)
        for p, info in found.items()
        if p.startswith(prefix) and not p.endswith("/") and info.get("type") != "directory"
    ]
    return sorted(files, key=lambda item: _walk_order(item[0]))


def object_signature(objects: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """A signature of objects from their listings: each one's name, size and version."""
    h = new_hash()
    for rel, info in objects:
        version = next((f"{k}={info[k]}" for k in VERSION_FIELDS if info.get(k)), "")
        h.update(f"{rel}\0{info.get('size')}\0{version}\n".encode())
    return f"o:{h.hexdigest()}"


def info_or_none(fs: Any, path: str) -> dict[str, Any] | None:
    """The listing of `path` in `fs`, None when nothing is there."""
    try:
        info: dict[str, Any] = fs.info(path)
    except FileNotFoundError:
        return None
    return info


def remove_local(path: str) -> None:
    """Remove the file, symlink or directory at `path`; nothing there is fine."""
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def _no_content(directory: str, names: list[str]) -> set[str]:
    """The entries of `directory` that hold no bytes: not a regular file or directory."""
    skipped = set()
    for name in names:
        try:
            mode = os.stat(os.path.join(directory, name)).st_mode
        except OSError:  # a dangling symlink
            skipped.add(name)
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            skipped.add(name)
        elif stat.S_ISDIR(mode) and os.path.islink(os.path.join(directory, name)):
            # A link back up the tree would be copied forever; the digest skips it too.
            real = os.path.realpath(os.path.join(directory, name))
            if os.path.commonpath([real, os.path.realpath(directory)]) == real:
                skipped.add(name)
    return skipped


def copy_local(source: str, target: str) -> None:
    """Copy the file or directory `source` to the absolute path `target`, replacing it.

    Copying a path onto itself does nothing.

    Raises:
        headwater.errors.StorageError: `source` is a directory and `target` lies inside it.
        OSError: The copy failed.
    """
    source = os.path.abspath(source)
    if source == target or (os.path.exists(target) and os.path.samefile(source, target)):
        return
    if os.path.isdir(source) and os.path.commonpath([source, target]) == source:
        raise StorageError(f"cannot copy {source!r} into itself ({target!r})")
    remove_local(target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(source):
        # Symlinks followed and special files (FIFOs, sockets) left out, as the digest does.
        shutil.copytree(source, target, ignore=_no_content)
    else:
        shutil.copy2(source, target)
