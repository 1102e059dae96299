"""`FsspecArtifactStore` against a real S3 server (moto on loopback), found through
`AWS_ENDPOINT_URL` as a MinIO user would configure it."""

from __future__ import annotations

import multiprocessing
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import S3Server, moto_server, s3_bucket, s3_env  # noqa: F401

from headwater.artifacts import FsspecArtifactStore, store_for
from headwater.artifacts.base import Digest, content_digest
from headwater.errors import StorageError

pytestmark = pytest.mark.integration
pytest.importorskip("s3fs")

TREE = {"z": b"root file", "a/x": b"x" * 10, "a/b/y": b"deep", "empty": b""}


def write_tree(top: Path, tree: dict[str, bytes] = TREE) -> Path:
    for rel, data in tree.items():
        path = top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return top


def read_tree(top: Path) -> dict[str, bytes]:
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*") if p.is_file()}


@pytest.fixture
def store(s3_bucket: str) -> FsspecArtifactStore:  # noqa: F811
    return FsspecArtifactStore(f"s3://{s3_bucket}/runs")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An endpoint that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_endpoint_comes_from_the_environment(store: FsspecArtifactStore, s3_env: S3Server) -> None:  # noqa: F811
    assert store.endpoint == s3_env.endpoint


def test_check_passes_for_an_existing_bucket(store: FsspecArtifactStore) -> None:
    store.check()


def test_check_of_a_missing_bucket_is_one_line(s3_env: S3Server) -> None:  # noqa: F811
    with pytest.raises(StorageError) as info:
        FsspecArtifactStore("s3://hw-no-such-bucket/runs").check()
    message = str(info.value)
    assert message == (
        f"bucket 'hw-no-such-bucket' does not exist at {s3_env.endpoint}: "
        "create it or choose another --pipeline-root"
    )


@pytest.mark.parametrize(
    "endpoint",
    ["refused", "silent"],
    ids=["connection-refused", "never-answers"],
)
def test_check_of_an_unreachable_endpoint_fails_fast(
    s3_env: S3Server,  # noqa: F811
    silent_server: str,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
) -> None:
    url = "http://127.0.0.1:1" if endpoint == "refused" else silent_server
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    store = FsspecArtifactStore("s3://bucket-x/runs")
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        store.check()
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert url in message
    assert "\n" not in message
    assert "Traceback" not in message


def test_uri_for_starts_with_the_root(store: FsspecArtifactStore, s3_bucket: str) -> None:  # noqa: F811
    assert store.uri_for("p", "run", "task", "out") == f"s3://{s3_bucket}/runs/p/run/task/out"
    with pytest.raises(StorageError):
        store.uri_for("p", "..")


def test_file_round_trip(store: FsspecArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "model.bin"
    data = bytes(range(256)) * 9000  # > 2 MiB: several digest chunks
    source.write_bytes(data)
    uri = store.uri_for("p", "run", "train", "model")
    assert not store.exists(uri)
    store.upload(str(source), uri)
    assert store.exists(uri)
    assert store.digest(uri)[:2] == (content_digest(str(source)).hex, len(data))
    target = tmp_path / "down" / "model.bin"
    store.download(uri, str(target))
    assert target.read_bytes() == data
    store.delete(uri)
    assert not store.exists(uri)
    assert store.digest(uri) is None


def test_directory_round_trip(store: FsspecArtifactStore, tmp_path: Path) -> None:
    source = write_tree(tmp_path / "dataset")
    uri = store.uri_for("p", "run", "prep", "dataset")
    store.upload(str(source), uri)
    assert store.exists(uri)
    assert store.exists(uri + "/a/b/y")
    assert store.digest(uri)[:2] == (
        content_digest(str(source)).hex,
        sum(len(data) for data in TREE.values()),
    )
    target = tmp_path / "down" / "dataset"
    store.download(uri, str(target))
    assert read_tree(target) == TREE
    store.upload(str(write_tree(tmp_path / "v2", {"only": b"new"})), uri)
    store.download(uri, str(target))
    assert read_tree(target) == {"only": b"new"}
    store.delete(uri)
    assert not store.exists(uri)


def test_delete_spares_names_sharing_a_prefix(store: FsspecArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"1")
    store.upload(str(source), store.uri_for("a"))
    store.upload(str(source), store.uri_for("ab"))
    store.delete(store.uri_for("a"))
    store.delete(store.uri_for("never-written"))
    assert not store.exists(store.uri_for("a"))
    assert store.exists(store.uri_for("ab"))


@pytest.mark.parametrize(
    "uri",
    ["s3://{bucket}/runs/a/../../x", "s3://{bucket}/runs-sibling/x", "s3://other-bucket/runs/x"],
    ids=["dotdot-trick", "sibling-prefix", "other-bucket"],
)
def test_writes_outside_the_root_are_refused(
    store: FsspecArtifactStore,
    s3_bucket: str,  # noqa: F811
    tmp_path: Path,
    uri: str,
) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"1")
    with pytest.raises(StorageError, match="not inside the artifact root"):
        store.upload(str(source), uri.format(bucket=s3_bucket))
    with pytest.raises(StorageError, match="not inside the artifact root"):
        store.delete(uri.format(bucket=s3_bucket))


def test_reads_from_another_bucket(
    store: FsspecArtifactStore,
    s3_env: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    other = FsspecArtifactStore(f"s3://{s3_env.make_bucket()}")
    source = tmp_path / "f"
    source.write_bytes(b"imported")
    uri = other.uri_for("data")
    other.upload(str(source), uri)
    assert store.exists(uri)
    assert store.digest(uri)[:2] == (content_digest(str(source)).hex, 8)


def test_stores_do_not_share_clients_across_endpoints(
    s3_env: S3Server,  # noqa: F811
    s3_bucket: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = f"s3://{s3_bucket}/runs"
    working = store_for(root)
    working.check()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    broken = store_for(root)
    assert broken is not working
    with pytest.raises(StorageError, match=r"127\.0\.0\.1:1\b"):
        broken.check()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env.endpoint)
    assert store_for(root) is working


def _child_reads(store: FsspecArtifactStore, uri: str, digest: Digest) -> None:
    assert store.exists(uri)
    assert store.digest(uri) == digest
    store.delete(uri)


# Python 3.12+ warns when forking a process that has threads (fsspec's IO thread runs here).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_store_works_in_a_forked_child(store: FsspecArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"fork")
    uri = store.uri_for("forked")
    store.upload(str(source), uri)  # the parent's s3fs client and event loop now exist
    digest = store.digest(uri)
    assert digest is not None
    child = multiprocessing.get_context("fork").Process(
        target=_child_reads, args=(store, uri, digest)
    )
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert not store.exists(uri)  # the child deleted it; the parent's client still works
