"""Artifact stores: where artifact bytes live (a local directory, S3, GCS), addressed by URI."""

from headwater.artifacts.base import ArtifactStore, Digest, content_digest, stat_signature
from headwater.artifacts.fsspec_store import FsspecArtifactStore, store_for
from headwater.paths import is_remote_uri

__all__ = [
    "ArtifactStore",
    "Digest",
    "FsspecArtifactStore",
    "content_digest",
    "is_remote_uri",
    "stat_signature",
    "store_for",
]
