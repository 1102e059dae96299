"""Artifact stores: where artifact bytes live (a local directory, S3, GCS), addressed by URI."""

from headwater.artifacts.base import ArtifactStore, Digest, content_digest, stat_signature
from headwater.artifacts.fsspec_store import FsspecArtifactStore, is_remote_uri, store_for

__all__ = [
    "ArtifactStore",
    "Digest",
    "FsspecArtifactStore",
    "content_digest",
    "is_remote_uri",
    "stat_signature",
    "store_for",
]
