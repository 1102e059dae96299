"""Artifact stores: where artifact bytes live (a local directory, S3, GCS), addressed by URI."""

from headwater.artifacts.base import ArtifactStore
from headwater.artifacts.fsspec_store import FsspecArtifactStore, is_remote_uri, store_for

__all__ = ["ArtifactStore", "FsspecArtifactStore", "is_remote_uri", "store_for"]
