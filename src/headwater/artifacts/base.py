"""The `ArtifactStore` interface: where artifact bytes live, addressed by URI.

Layout under a pipeline root: `<root>/<pipeline>/<run_id>/<task>/<output>`. Every path segment
is checked, so nothing can be written outside the root (`..`, absolute paths and separators in
names are rejected). Components always see local paths: for a remote root the task process
downloads its inputs first and uploads its outputs after (see `executors.launcher`).

To add a backend, subclass `ArtifactStore` (see `FsspecArtifactStore`, which covers local
directories, `s3://` (any S3-compatible server: AWS, MinIO, moto) and `gs://`).

This module also owns the one content digest (`content_digest`, `walk_files`) that the cache,
the recorder and every store use, and the stat signature (`stat_signature`) that says when a
recorded digest can be trusted without reading the bytes again (ADR 4).

What an artifact's content is, once for every user: the bytes of a file; for a directory,
every regular file reachable under it, symlinks followed (as a component reading it, and an
upload, see them), each as its relative path ('/'-separated), a NUL and its bytes, in walk
order (a directory's files by name, then its subdirectories by name). FIFOs, sockets,
devices and dangling symlinks hold no bytes: they are left out and never opened (opening a
FIFO blocks until a writer comes); a symlink back to a directory being walked is not
followed again. Empty directories are left out too, as object stores cannot hold them, so a
tree and its upload have the same digest.
"""

from __future__ import annotations

import abc
import hashlib
import os
import stat
from collections.abc import Iterator
from typing import Any, NamedTuple

from headwater.paths import local_path

#: Bytes read at a time when hashing.
CHUNK = 1 << 20


class Digest(NamedTuple):
    """What is at an artifact's URI, as `content_digest` or `ArtifactStore.digest` found it."""

    #: BLAKE2b-160 of the content, hex.
    hex: str
    #: Bytes hashed.
    size: int
    #: `stat_signature` as it was before the bytes were read (None where a store has none).
    signature: str | None = None


def new_hash() -> Any:
    """The content hash: BLAKE2b with a 160-bit digest (standard library, fast)."""
    return hashlib.blake2b(digest_size=20)


def hash_stream(h: Any, stream: Any) -> int:
    """Feed `stream` into `h` in `CHUNK`s; return the number of bytes read."""
    size = 0
    while chunk := stream.read(CHUNK):
        h.update(chunk)
        size += len(chunk)
    return size


def walk_files(top: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """(relative path, full path, stat) of every regular file under the directory `top`.

    In digest order, symlinks followed, special files and dangling links left out (see the
    module docstring). Directories that vanish or cannot be listed mid-walk are skipped.
    """
    for kind, rel, full, st in walk_tree(top):
        if kind == "f":
            yield rel, full, st


def walk_tree(top: str) -> Iterator[tuple[str, str, str, os.stat_result]]:
    """("f" | "d", relative path, full path, stat) of each regular file and each directory
    below the directory `top`, in digest order: a directory's files by name, then each
    subdirectory (its own entry, then what is inside it). Iterative, so depth is not bounded
    by the stack."""
    try:
        top_stat = os.stat(top)
    except OSError:
        return
    # ("list", path, prefix, ancestors) lists a directory; ("dir", ...) yields its entry.
    stack: list[tuple[str, str, str, Any]] = [
        ("list", top, "", frozenset({(top_stat.st_dev, top_stat.st_ino)}))
    ]
    while stack:
        action, path, prefix, extra = stack.pop()
        if action == "dir":
            yield "d", prefix, path, extra
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError:
            continue
        subdirs = []
        for name in names:
            full = os.path.join(path, name)
            try:
                st = os.stat(full)  # follows symlinks; a dangling one raises
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield "f", prefix + name, full, st
            elif stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in extra:
                subdirs.append((name, full, st))
        # Pushed in reverse, so the first subdirectory (its entry, then its contents) is next.
        for name, full, st in reversed(subdirs):
            stack.append(("list", full, prefix + name + "/", extra | {(st.st_dev, st.st_ino)}))
            stack.append(("dir", full, prefix + name, st))


def content_digest(path: str) -> Digest | None:
    """The content digest of a local file or directory (a path or `file://` URI).

    Returns:
        None when nothing with content is there (a missing path, a FIFO or other special
        file, a remote URI: its digest belongs to its store).
    """
    path = local_path(path) or ""
    if not path:
        return None
    try:
        top = os.stat(path)
    except OSError:
        return None
    h = new_hash()
    marks = _Signature()
    if stat.S_ISREG(top.st_mode):
        size = _hash_file(h, path, marks, "")
        if size is None:
            return None
        return Digest(h.hexdigest(), size, marks.hexdigest())
    if not stat.S_ISDIR(top.st_mode):
        return None
    marks.add("d", "", top)
    size = 0
    for kind, rel, full, st in walk_tree(path):
        if kind == "d":
            marks.add("d", rel, st)
            continue
        h.update(rel.encode() + b"\0")
        read = _hash_file(h, full, marks, rel)
        size += read or 0
    return Digest(h.hexdigest(), size, marks.hexdigest())


def stat_signature(path: str) -> str | None:
    """What a local file or directory looks like to `stat`, hashed; None if nothing is there.

    It covers, for the path and everything `content_digest` reads below it (and each
    directory on the way), the relative path, size, mtime_ns, ctime_ns, inode and device.
    Equal to the signature `content_digest` returned only if none of these moved since: a
    rewrite with its old mtime put back (`cp -p`, `rsync -t`, a restore) still moves ctime,
    which no tool can set, and a file replaced by rename has another inode.
    """
    path = local_path(path) or ""
    try:
        top = os.stat(path) if path else None
    except OSError:
        return None
    if top is None:
        return None
    marks = _Signature()
    if stat.S_ISREG(top.st_mode):
        marks.add("f", "", top)
        return marks.hexdigest()
    if not stat.S_ISDIR(top.st_mode):
        return None
    marks.add("d", "", top)
    for kind, rel, _, st in walk_tree(path):
        marks.add(kind, rel, st)
    return marks.hexdigest()


class _Signature:
    """Accumulates the stat fields the cache trusts into one hash."""

    def __init__(self) -> None:
        self._h = hashlib.blake2b(digest_size=16)

    def add(self, kind: str, rel: str, st: os.stat_result) -> None:
        fields = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        self._h.update(f"{kind}\0{rel}\0{fields}\n".encode())

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _hash_file(h: Any, path: str, marks: _Signature, rel: str) -> int | None:
    """Hash the regular file at `path` into `h` and its stat into `marks`; None if it is not
    (or no longer) a regular file.

    Opened non-blocking: should a FIFO have replaced the file since it was listed, opening
    it returns at once instead of waiting for a writer, and fstat refuses it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        # Taken before reading: a write during the read moves the signature, never hides.
        marks.add("f", rel, st)
        return hash_stream(h, fh)


class ArtifactStore(abc.ABC):
    """Artifact bytes under one pipeline root."""

    root: str

    @abc.abstractmethod
    def check(self) -> None:
        """Verify the root is usable (bucket exists, endpoint answers, directory writable).

        Raises:
            headwater.errors.StorageError: With one line naming the root and the fix.
        """

    @abc.abstractmethod
    def uri_for(self, *parts: str) -> str:
        """The URI of `<root>/<part>/<part>/...`, each part checked to stay inside the root.

        Raises:
            headwater.errors.StorageError: A part is empty, `.`/`..`, absolute or has a slash.
        """

    @property
    @abc.abstractmethod
    def is_remote(self) -> bool:
        """True when artifacts must be copied to and from the task's local disk."""

    @abc.abstractmethod
    def exists(self, uri: str) -> bool:
        """True if something (a file or a directory) is at `uri`."""

    @abc.abstractmethod
    def upload(self, local_path: str, uri: str) -> None:
        """Copy a local file or directory to `uri` (inside the root)."""

    @abc.abstractmethod
    def download(self, uri: str, local_path: str) -> None:
        """Copy the file or directory at `uri` to `local_path`."""

    @abc.abstractmethod
    def delete(self, uri: str) -> None:
        """Remove the file or directory at `uri` (inside the root); absent is fine."""

    @abc.abstractmethod
    def digest(self, uri: str) -> Digest | None:
        """The content digest, size and signature of what is at `uri`; None if nothing.

        Streamed, never loaded whole. The digest must equal `content_digest` of the same
        tree on a local disk (see the module docstring for what it covers).
        """

    @abc.abstractmethod
    def signature(self, uri: str) -> str | None:
        """A cheap token that changes whenever the content at `uri` may have; None if nothing
        is there. Without reading the bytes: `stat_signature` for a local path, a listing of
        object sizes and versions (ETag, generation) for an object store.
        """
