"""The `ArtifactStore` interface: where artifact bytes live, addressed by URI.

Layout under a pipeline root: `<root>/<pipeline>/<run_id>/<task>/<output>`. Every path segment
is checked, so nothing can be written outside the root (`..`, absolute paths and separators in
names are rejected). Components always see local paths: for a remote root the task process
downloads its inputs first and uploads its outputs after (see `executors.launcher`).

To add a backend, subclass `ArtifactStore` (see `FsspecArtifactStore`, which covers local
directories, `s3://` (any S3-compatible server: AWS, MinIO, moto) and `gs://`).
"""

from __future__ import annotations

import abc


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
    def digest(self, uri: str) -> tuple[str, int] | None:
        """(content digest, size in bytes) of what is at `uri`, streamed; None if nothing.

        The digest is BLAKE2b-160 over the bytes of a file, or over each relative path and
        its bytes, in sorted order, for a directory (the same as `caching.keys.content_digest`
        for local paths).
        """
