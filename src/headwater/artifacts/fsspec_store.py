"""`FsspecArtifactStore`: artifacts in a local directory, S3 (AWS, MinIO), GCS or memory.

Local roots are plain absolute paths (no `file://`), because KFP's executor uses a local URI
as the path its component reads and writes. Remote roots are fsspec URLs. fsspec backends
(s3fs, gcsfs) are imported only when a store first touches its root, so importing this module
stays cheap.

The S3 endpoint comes from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, as for the AWS CLI and
MinIO clients; credentials and region come from botocore's usual chain (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, profiles).

Opening a root's filesystem and translating its errors live in `fsspec_backends`; copying,
listing and signing file trees in `fsspec_trees`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterator
from typing import Any

from headwater.artifacts.base import (
    CHUNK,
    ArtifactStore,
    Digest,
    content_digest,
    hash_stream,
    new_hash,
    stat_signature,
    walk_files,
)
from headwater.artifacts.fsspec_backends import (
    BACKENDS,
    CHECK_CONFIG,
    bucket_errors,
    check_local_root,
    describe_location,
    local_errors,
    open_filesystem,
    require_backend,
    s3_endpoint,
    translated_errors,
)
from headwater.artifacts.fsspec_trees import (
    copy_local,
    info_or_none,
    object_signature,
    remote_files,
    remove_local,
)
from headwater.artifacts.remote import S3Limits, s3_limits
from headwater.errors import StorageError
from headwater.paths import resolve_inside, scheme_of

KNOWN_SCHEMES = ("file", "s3", "gs", "memory")
#: Schemes a pipeline root may use: every process of a run (the engine, each task) sees the
#: same bytes there. `memory://` is known (a store in one process, for tests and reads) but
#: private to the process that wrote it, so a root there would lose every task's outputs.
SHARED_SCHEMES = ("file", "s3", "gs")
_ROOT_HELP = "use a directory, s3://bucket/prefix or gs://bucket/prefix"

_FORBIDDEN_IN_PART = ("/", "\\", "\0")

_stores: dict[tuple[str, str | None], FsspecArtifactStore] = {}


def store_for(root: str) -> ArtifactStore:
    """The store for `root`, one instance per root (and per S3 endpoint) in this process.

    Raises:
        headwater.errors.StorageError: The root's scheme is unknown or its backend missing.
    """
    return _cached_store(root)


def _cached_store(root: str) -> FsspecArtifactStore:
    scheme = scheme_of(root)
    if scheme == "file":
        path = root[len("file://") :] if root.startswith("file://") else root
        key: tuple[str, str | None] = (os.path.abspath(os.path.expanduser(path)), None)
    else:
        # The endpoint is part of the key: a store keeps the endpoint it was created with.
        key = (root.rstrip("/"), s3_endpoint() if scheme == "s3" else None)
    store = _stores.get(key)
    if store is None:
        store = _stores.setdefault(key, FsspecArtifactStore(root))
    return store


class FsspecArtifactStore(ArtifactStore):
    """Artifacts under a local directory or an `s3://`, `gs://` or `memory://` root.

    Reads (`exists`, `download`, `digest`) accept any URI, also outside the root (an imported
    artifact, another run's cached output); writes and deletes must stay inside the root.

    Args:
        root: A directory (absolute, relative, `~/...` or `file://...`), `s3://bucket/prefix`,
            `gs://bucket/prefix` or `memory://prefix`.

    Raises:
        headwater.errors.StorageError: Unknown scheme, no bucket, or the backend's package
            (s3fs, gcsfs) is not installed.
    """

    def __init__(self, root: str) -> None:
        scheme = scheme_of(root)
        if scheme not in KNOWN_SCHEMES:
            raise StorageError(
                f"unknown artifact root scheme {scheme!r} in {root!r} "
                f"(known: {', '.join(SHARED_SCHEMES)}): {_ROOT_HELP}"
            )
        self.scheme = scheme
        self.endpoint: str | None = s3_endpoint() if scheme == "s3" else None
        if scheme == "file":
            path = root[len("file://") :] if root.startswith("file://") else root
            if not path:
                raise StorageError("empty artifact root: give a directory or a URL")
            self.root = os.path.abspath(os.path.expanduser(path))
            self._root_path = self.root
        else:
            self._root_path = _normalise_remote(root, scheme)
            if scheme in BACKENDS and self._root_path == "/":
                raise StorageError(
                    f"artifact root {root!r} names no bucket: use {scheme}://<bucket>[/prefix]"
                )
            self.root = f"{scheme}://{self._root_path[1:]}"
            require_backend(scheme, self.root)
        self._fs: Any = None
        self._fs_pid = 0
        self._limits: S3Limits | None = None

    def __repr__(self) -> str:
        return f"FsspecArtifactStore({self.root!r})"

    @property
    def is_remote(self) -> bool:
        """True for every root but a local directory."""
        return self.scheme != "file"

    def check(self) -> None:
        """Verify the root is usable: a writable directory, or a bucket that answers.

        A root every task of a run can share is required: `memory://` is refused, because
        each task process would write into its own memory and every artifact would be lost.

        Raises:
            headwater.errors.StorageError: One line naming the root, the endpoint and the fix.
        """
        if self.scheme not in SHARED_SCHEMES:
            raise StorageError(
                f"artifact root {self.root!r} cannot be a pipeline root: {self.scheme}:// is "
                "private to one process, and each task runs in its own, so its artifacts "
                f"would be lost: {_ROOT_HELP}"
            )
        if self.scheme == "file":
            check_local_root(self.root)
        elif self.scheme in BACKENDS:
            self._check_bucket()

    def uri_for(self, *parts: str) -> str:
        """`<root>/<part>/...`; each part must be a plain name.

        Raises:
            headwater.errors.StorageError: A part is empty, `.`/`..`, starts with `/` or `~`,
                or contains `/`, `\\` or NUL.
        """
        if not parts:
            raise StorageError("uri_for needs at least one path part below the artifact root")
        for part in parts:
            if (
                not isinstance(part, str)
                or part in ("", ".", "..")
                or part.startswith(("/", "~"))
                or any(c in part for c in _FORBIDDEN_IN_PART)
            ):
                raise StorageError(
                    f"invalid artifact path part {part!r} in {parts!r}: parts must be plain "
                    "names, not empty, '.' or '..', without '/', '\\' or NUL, "
                    "not starting with '~'"
                )
        if self.scheme == "file":
            return os.path.join(self.root, *parts)
        sep = "" if self.root.endswith("://") else "/"
        return self.root + sep + "/".join(parts)

    def exists(self, uri: str) -> bool:
        """True if a file or a directory is at `uri`."""
        store, path = self._reader(uri)
        if store.scheme == "file":
            return os.path.lexists(path)
        with store._translate("check", uri):
            return bool(store._filesystem().exists(path))

    def upload(self, local_path: str, uri: str) -> None:
        """Copy a local file or directory to `uri`, replacing what was there.

        Uploading a path onto itself (a local root, where the component wrote in place) does
        nothing. An empty directory leaves nothing behind on object stores, which have no
        directories.

        Raises:
            headwater.errors.StorageError: `uri` is not inside the root, `local_path` does not
                exist, or the copy failed.
        """
        target = self._inside(uri, "upload to")
        if not os.path.exists(local_path):
            raise StorageError(f"cannot upload {local_path!r} to {uri!r}: it does not exist")
        if self.scheme == "file":
            with local_errors("upload", uri):
                copy_local(local_path, target)
            return
        fs = self._filesystem()
        with self._translate("upload to", uri):
            self._remove(target)
            if os.path.isdir(local_path):
                pairs = [(full, f"{target}/{rel}") for rel, full, _ in walk_files(local_path)]
                if pairs:
                    fs.put([lp for lp, _ in pairs], [rp for _, rp in pairs])
            else:
                fs.put_file(local_path, target)

    def download(self, uri: str, local_path: str) -> None:
        """Copy the file or directory at `uri` to `local_path`, replacing what was there.

        Parent directories of `local_path` are created. Downloading a path onto itself does
        nothing.

        Raises:
            headwater.errors.StorageError: Nothing is at `uri`, or the copy failed.
        """
        store, path = self._reader(uri)
        if store.scheme == "file":
            if not os.path.exists(path):
                raise StorageError(f"cannot download {uri!r}: nothing is there")
            with local_errors("download", uri):
                copy_local(path, os.path.abspath(local_path))
            return
        fs = store._filesystem()
        with store._translate("download", uri):
            info = info_or_none(fs, path)
            if info is None:
                raise StorageError(f"cannot download {uri!r}: nothing is there")
            remove_local(local_path)
            if info["type"] != "directory":
                os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
                fs.get_file(path, local_path)
                return
            os.makedirs(local_path, exist_ok=True)
            files = [(rel, full) for rel, full, _ in remote_files(fs, path)]
            if files:
                fs.get(
                    [full for _, full in files],
                    [os.path.join(local_path, *rel.split("/")) for rel, _ in files],
                )

    def delete(self, uri: str) -> None:
        """Remove the file or directory at `uri` (inside the root); nothing there is fine.

        Raises:
            headwater.errors.StorageError: `uri` is not inside the root, or removal failed.
        """
        target = self._inside(uri, "delete")
        if self.scheme == "file":
            with local_errors("delete", uri):
                remove_local(target)
            return
        with self._translate("delete", uri):
            self._remove(target)

    def digest(self, uri: str) -> Digest | None:
        """The content digest of what is at `uri`, read in 1 MiB chunks (`content_digest`
        for a local path; for an object store the same hash over the objects, in the same
        order, so a tree and its upload agree), with its size and signature.

        Returns:
            None when nothing is at `uri`.
        """
        store, path = self._reader(uri)
        if store.scheme == "file":
            return content_digest(path)
        fs = store._filesystem()
        h = new_hash()
        size = 0
        with store._translate("digest", uri):
            info = info_or_none(fs, path)
            if info is None:
                return None
            if info["type"] != "directory":
                signature = object_signature([("", info)])
                with fs.open(path, "rb", block_size=CHUNK) as fh:
                    size = hash_stream(h, fh)
            else:
                files = remote_files(fs, path)
                signature = object_signature([(rel, found) for rel, _, found in files])
                for rel, full, _ in files:
                    h.update(rel.encode() + b"\0")
                    with fs.open(full, "rb", block_size=CHUNK) as fh:
                        size += hash_stream(h, fh)
        return Digest(h.hexdigest(), size, signature)

    def signature(self, uri: str) -> str | None:
        """`stat_signature` of a local path; for an object store, a hash of each object's
        relative name, size and version (ETag, generation), from one listing.

        Returns:
            None when nothing is at `uri`.
        """
        store, path = self._reader(uri)
        if store.scheme == "file":
            return stat_signature(path)
        fs = store._filesystem()
        with store._translate("check", uri):
            info = info_or_none(fs, path)
            if info is None:
                return None
            if info["type"] != "directory":
                return object_signature([("", info)])
            return object_signature([(rel, found) for rel, _, found in remote_files(fs, path)])

    # -- paths ------------------------------------------------------------------------------

    def _to_fs_path(self, normalised: str) -> str:
        # memory:// paths keep their leading slash; bucket stores start at the bucket name.
        return normalised if self.scheme == "memory" else normalised.lstrip("/")

    def _inside(self, uri: str, action: str) -> str:
        """The backend path of `uri` after normalising it, if it lies strictly inside the root
        (a local one after resolving symlinks: a link under the root cannot lead out of it)."""
        scheme = scheme_of(uri)
        if scheme == self.scheme:
            if scheme == "file":
                path = os.path.abspath(uri[len("file://") :] if uri.startswith("file://") else uri)
                if resolve_inside(path, [self.root], strict=True) is not None:
                    return path
            else:
                path = _normalise_remote(uri, scheme)
                if path.startswith(self._root_path.rstrip("/") + "/") and path != "/":
                    return self._to_fs_path(path)
        raise StorageError(
            f"refusing to {action} {uri!r}: it is not inside the artifact root {self.root!r}"
        )

    def _reader(self, uri: str) -> tuple[FsspecArtifactStore, str]:
        """The store that can read `uri` (this one, or one for its scheme) and its path there."""
        scheme = scheme_of(uri)
        if scheme not in KNOWN_SCHEMES:
            raise StorageError(
                f"unknown URI scheme {scheme!r} in {uri!r} (known: {', '.join(KNOWN_SCHEMES)})"
            )
        if scheme == "file":
            path = os.path.abspath(uri[len("file://") :] if uri.startswith("file://") else uri)
            return (self if self.scheme == "file" else _cached_store(os.sep)), path
        normalised = _normalise_remote(uri, scheme)
        if scheme == self.scheme:
            return self, self._to_fs_path(normalised)
        bucket = normalised.split("/")[1] if scheme in BACKENDS else ""
        other = _cached_store(f"{scheme}://{bucket}")
        return other, other._to_fs_path(normalised)

    # -- backends ---------------------------------------------------------------------------

    def _filesystem(self) -> Any:
        """This store's fsspec filesystem, made anew in a forked child.

        fsspec's async filesystems (s3fs, gcsfs) raise "This class is not fork-safe" when used
        in a process other than the one that created them.
        """
        pid = os.getpid()
        if self._fs is None or self._fs_pid != pid:
            self._fs, self._fs_pid = self._new_filesystem(), pid
        return self._fs

    def _new_filesystem(self, **options: Any) -> Any:
        if self.scheme == "s3":
            # Bounded calls (see `remote`): botocore's timeouts and retries, read now, so a
            # task process applies the settings it inherited.
            self._limits = s3_limits()
        limits = self._limits if self.scheme == "s3" else None
        return open_filesystem(
            self.scheme, self.root, endpoint=self.endpoint, limits=limits, **options
        )

    def _where(self) -> str:
        return describe_location(self.scheme, self.endpoint)

    def _remove(self, path: str) -> None:
        fs = self._filesystem()
        with contextlib.suppress(FileNotFoundError):
            fs.rm(path, recursive=True)

    @contextlib.contextmanager
    def _translate(self, action: str, uri: str) -> Iterator[None]:
        if self.scheme == "s3":
            self._filesystem()  # reads the limits, if this process has not yet
        limits = self._limits if self.scheme == "s3" else None
        with translated_errors(action, uri, self._where(), limits):
            yield

    # -- check ------------------------------------------------------------------------------

    def _check_bucket(self) -> None:
        bucket = self._root_path.split("/")[1]
        with bucket_errors(bucket, self._where(), self.root):
            if self.scheme == "s3":
                fs = self._new_filesystem(config_kwargs=dict(CHECK_CONFIG))
                fs.retries = 1  # s3fs's own retry loop, on top of botocore's
                fs.call_s3("head_bucket", Bucket=bucket)
            else:
                self._filesystem().info(bucket)


def _normalise_remote(uri: str, scheme: str) -> str:
    """`/bucket/key...` with `.`, `..` and doubled slashes resolved (clamped at `/`)."""
    rest = uri[len(scheme) + 3 :]
    return posixpath.normpath("/" + rest.lstrip("/"))
