"""An artifact's content for a download or KFP's `:read`: a file as itself, a folder as a
.tar.gz; only inside an artifact store its run wrote to, and at most the read limit."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from headwater.api.exports import export_artifact
from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.metadata.base import ArtifactRecord
from headwater.metadata.sql import SqlMetadataStore


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlMetadataStore:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADWATER_PIPELINE_ROOT", str(tmp_path / "root"))
    return SqlMetadataStore(f"sqlite:///{tmp_path / 'md.db'}")


def artifact(store: SqlMetadataStore, path: Path) -> int:
    return store.record_artifact(ArtifactRecord(uri=str(path), name=path.name))


def test_a_file_is_itself_and_a_folder_a_tarball(store: SqlMetadataStore, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "model").mkdir(parents=True)
    (root / "model" / "weights.bin").write_bytes(b"\x00\x01")
    (root / "data.csv").write_text("a,b\n1,2\n")
    data = export_artifact(artifact(store, root / "data.csv"), metadata=store)
    assert (data.filename, data.data) == ("data.csv", b"a,b\n1,2\n")
    for ref, tar in (
        (artifact(store, root / "model"), False),
        (artifact(store, root / "data.csv"), True),
    ):
        packed = export_artifact(ref, metadata=store, tar=tar)
        assert packed.media_type == "application/gzip" and packed.filename.endswith(".tar.gz")
        with tarfile.open(fileobj=io.BytesIO(packed.data), mode="r:gz") as archive:
            files = {m.name: archive.extractfile(m).read() for m in archive if m.isfile()}  # type: ignore[union-attr]
        assert files in ({"model/weights.bin": b"\x00\x01"}, {"data.csv": b"a,b\n1,2\n"})


def test_only_what_lies_in_an_artifact_store_is_read(
    store: SqlMetadataStore, tmp_path: Path
) -> None:
    (tmp_path / "root").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    escape = tmp_path / "root" / "link"
    escape.symlink_to(secret)  # inside by name, outside once resolved
    for path in (secret, escape):
        with pytest.raises(NotFoundError, match="outside the artifact stores"):
            export_artifact(artifact(store, path), metadata=store)
    with pytest.raises(NotFoundError, match="nothing is at"):
        export_artifact(artifact(store, tmp_path / "root" / "gone"), metadata=store)


def test_an_artifact_over_the_limit_is_refused_naming_its_uri(
    store: SqlMetadataStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEADWATER_ARTIFACT_READ_LIMIT", "4")
    big = tmp_path / "root" / "big"
    big.mkdir(parents=True)
    (big / "part").write_bytes(b"12345")
    with pytest.raises(
        InvalidArgumentError, match=r"5 bytes, over the read limit of 4 .*read it from"
    ):
        export_artifact(artifact(store, big), metadata=store)
