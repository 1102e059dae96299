"""`FsspecArtifactStore` on local directories and `memory://`: paths, safety, copies, digests."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.artifacts import ArtifactStore, FsspecArtifactStore, is_remote_uri, store_for
from headwater.artifacts.base import content_digest
from headwater.errors import StorageError

StoreFactory = Callable[[str], FsspecArtifactStore]

# Chosen so that os.walk order (a directory's files, then its sorted subdirectories) differs
# from plain sorted order: "z" comes before "a/x" and "a/b/y" after "a/c".
TREE = {
    "z": b"root file",
    "aa": b"",
    "a/x": b"x" * 10,
    "a/c": b"c",
    "a/b/y": b"deep",
    "a/b/w/v": b"deeper",
}


def write_tree(top: Path, tree: dict[str, bytes] = TREE) -> Path:
    for rel, data in tree.items():
        path = top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return top


def read_tree(top: Path) -> dict[str, bytes]:
    return {
        p.relative_to(top).as_posix(): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()
    }


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Build a store of a kind: `local` (a tmp directory) or `memory` (a unique prefix)."""
    made: list[FsspecArtifactStore] = []

    def make(kind: str) -> FsspecArtifactStore:
        if kind == "local":
            store = FsspecArtifactStore(str(tmp_path / "root"))
        else:
            store = FsspecArtifactStore(f"memory://hw-{uuid.uuid4().hex}")
        made.append(store)
        return store

    yield make
    for store in made:
        if store.scheme == "memory":
            with contextlib.suppress(FileNotFoundError):
                store._filesystem().rm(store._root_path, recursive=True)


KINDS = pytest.mark.parametrize("kind", ["local", "memory"])


# -- roots --------------------------------------------------------------------------------


def test_local_root_is_an_absolute_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert FsspecArtifactStore("runs").root == str(tmp_path / "runs")
    assert FsspecArtifactStore(f"file://{tmp_path}/runs/").root == str(tmp_path / "runs")
    assert not FsspecArtifactStore("runs").is_remote


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("memory://", "memory://"),
        ("memory://a/b/", "memory://a/b"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("s3://bucket", "s3://bucket"),
    ],
    ids=["memory-bare", "memory-prefix", "s3-prefix", "s3-bucket"],
)
def test_remote_root_is_normalised(root: str, expected: str) -> None:
    pytest.importorskip("s3fs")
    store = FsspecArtifactStore(root)
    assert store.root == expected
    assert store.is_remote


def test_unknown_scheme_lists_known_ones() -> None:
    with pytest.raises(StorageError) as info:
        FsspecArtifactStore("ftp://host/path")
    assert "unknown artifact root scheme 'ftp'" in str(info.value)
    assert "(known: file, s3, gs)" in str(info.value)


def test_bucket_root_needs_a_bucket() -> None:
    pytest.importorskip("s3fs")
    with pytest.raises(StorageError, match="names no bucket"):
        FsspecArtifactStore("s3://")


def test_missing_gcsfs_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if not installed
    with pytest.raises(StorageError, match=r"pip install 'headwater\[gcs\]'"):
        FsspecArtifactStore("gs://bucket/runs")


def test_importing_artifacts_does_not_import_fsspec_backends() -> None:
    script = (
        "import json, sys, headwater.artifacts\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'fsspec', 's3fs', 'gcsfs', 'botocore', 'aiobotocore', 'boto3'})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


# -- uri_for ------------------------------------------------------------------------------


@KINDS
def test_uri_for_joins_under_the_root(make_store: StoreFactory, kind: str) -> None:
    store = make_store(kind)
    uri = store.uri_for("pipe", "run-1", "task", "model")
    assert uri == store.root + "/pipe/run-1/task/model"


def test_uri_for_on_a_bare_memory_root() -> None:
    assert FsspecArtifactStore("memory://").uri_for("a", "b") == "memory://a/b"


@KINDS
@pytest.mark.parametrize(
    "part",
    ["", ".", "..", "a/b", "/abs", "a\\b", "a\0b", "~", "~user", "../x"],
    ids=["empty", "dot", "dotdot", "slash", "absolute", "backslash", "nul", "tilde",
         "tilde-user", "dotdot-slash"],
)  # fmt: skip
def test_uri_for_rejects_unsafe_parts(make_store: StoreFactory, kind: str, part: str) -> None:
    store = make_store(kind)
    with pytest.raises(StorageError, match="invalid artifact path part") as info:
        store.uri_for("run", part)
    assert repr(part) in str(info.value)


def test_uri_for_needs_a_part(make_store: StoreFactory) -> None:
    with pytest.raises(StorageError):
        make_store("local").uri_for()


def test_uri_for_allows_dots_inside_names(make_store: StoreFactory) -> None:
    store = make_store("memory")
    assert store.uri_for("a..b", ".hidden", "x~") == store.root + "/a..b/.hidden/x~"


# -- inside the root ----------------------------------------------------------------------


@KINDS
@pytest.mark.parametrize(
    "escape",
    [
        lambda root: root + "/a/../../x",
        lambda root: root + "/../outside",
        lambda root: root + "-sibling/x",
        lambda root: root,
        lambda root: root + "/.",
    ],
    ids=["dotdot-trick", "parent", "sibling-prefix", "the-root-itself", "root-dot"],
)
def test_writes_must_stay_inside_the_root(
    make_store: StoreFactory, tmp_path: Path, kind: str, escape: Callable[[str], str]
) -> None:
    store = make_store(kind)
    source = tmp_path / "f.txt"
    source.write_bytes(b"data")
    uri = escape(store.root)
    with pytest.raises(StorageError, match="not inside the artifact root"):
        store.upload(str(source), uri)
    with pytest.raises(StorageError, match="not inside the artifact root"):
        store.delete(uri)


@pytest.mark.parametrize(
    ("kind", "uri"),
    [("local", "memory://elsewhere/x"), ("memory", "/tmp/x"), ("memory", "s3://bucket/x")],
    ids=["local-to-memory", "memory-to-path", "memory-to-s3"],
)
def test_writes_to_another_scheme_are_refused(
    make_store: StoreFactory, tmp_path: Path, kind: str, uri: str
) -> None:
    store = make_store(kind)
    source = tmp_path / "f.txt"
    source.write_bytes(b"data")
    with pytest.raises(StorageError, match="not inside the artifact root"):
        store.upload(str(source), uri)


@KINDS
def test_normalised_uri_inside_the_root_is_accepted(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    source = tmp_path / "f.txt"
    source.write_bytes(b"data")
    store.upload(str(source), store.root + "/a/../b")
    assert store.exists(store.uri_for("b"))


# -- copies -------------------------------------------------------------------------------


@KINDS
def test_file_round_trip(make_store: StoreFactory, tmp_path: Path, kind: str) -> None:
    store = make_store(kind)
    source = tmp_path / "in.bin"
    source.write_bytes(b"\x00payload\xff")
    uri = store.uri_for("run", "task", "out")
    assert not store.exists(uri)
    store.upload(str(source), uri)
    assert store.exists(uri)
    target = tmp_path / "deep" / "er" / "out.bin"  # parents are created
    store.download(uri, str(target))
    assert target.read_bytes() == b"\x00payload\xff"
    store.delete(uri)
    assert not store.exists(uri)


@KINDS
def test_directory_round_trip(make_store: StoreFactory, tmp_path: Path, kind: str) -> None:
    store = make_store(kind)
    source = write_tree(tmp_path / "src")
    uri = store.uri_for("run", "task", "dataset")
    store.upload(str(source), uri)
    assert store.exists(uri)
    assert store.exists(uri + "/a/b/y")
    target = tmp_path / "dst" / "dataset"
    store.download(uri, str(target))
    assert read_tree(target) == TREE
    store.delete(uri)
    assert not store.exists(uri)
    assert not store.exists(uri + "/a/b/y")


@KINDS
def test_upload_replaces_what_was_there(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    uri = store.uri_for("out")
    store.upload(str(write_tree(tmp_path / "v1")), uri)
    store.upload(str(write_tree(tmp_path / "v2", {"only": b"new"})), uri)
    store.download(uri, str(tmp_path / "got"))
    assert read_tree(tmp_path / "got") == {"only": b"new"}


@KINDS
def test_download_replaces_the_local_target(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    uri = store.uri_for("out")
    store.upload(str(write_tree(tmp_path / "src", {"new": b"1"})), uri)
    target = write_tree(tmp_path / "dst", {"stale": b"0"})
    store.download(uri, str(target))
    assert read_tree(target) == {"new": b"1"}


@KINDS
def test_delete_leaves_names_sharing_a_prefix(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    source = tmp_path / "f"
    source.write_bytes(b"1")
    store.upload(str(source), store.uri_for("a"))
    store.upload(str(source), store.uri_for("ab"))
    store.delete(store.uri_for("a"))
    assert not store.exists(store.uri_for("a"))
    assert store.exists(store.uri_for("ab"))


@KINDS
def test_delete_of_nothing_is_fine(make_store: StoreFactory, kind: str) -> None:
    store = make_store(kind)
    store.delete(store.uri_for("never", "written"))


@KINDS
def test_download_of_nothing_is_a_storage_error(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    with pytest.raises(StorageError, match="nothing is there"):
        store.download(store.uri_for("missing"), str(tmp_path / "x"))


def test_upload_of_a_missing_local_path_is_a_storage_error(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store("memory")
    with pytest.raises(StorageError, match="does not exist"):
        store.upload(str(tmp_path / "missing"), store.uri_for("x"))


def test_local_upload_onto_itself_keeps_the_bytes(make_store: StoreFactory) -> None:
    # A local root hands components the URI as their path, so outputs are already in place.
    store = make_store("local")
    uri = store.uri_for("task", "model")
    write_tree(Path(uri))
    store.upload(uri, uri)
    store.upload(uri, "file://" + uri)
    assert read_tree(Path(uri)) == TREE


def test_file_uris_work_on_a_local_store(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store("local")
    source = tmp_path / "f"
    source.write_bytes(b"1")
    uri = "file://" + store.uri_for("x")
    store.upload(str(source), uri)
    assert store.exists(uri)
    assert store.digest(uri) == store.digest(store.uri_for("x"))


def test_reads_outside_the_root_are_allowed(make_store: StoreFactory, tmp_path: Path) -> None:
    # Imported artifacts and other runs' cached outputs live elsewhere.
    source = write_tree(tmp_path / "elsewhere")
    store = make_store("memory")
    assert store.exists(str(source))
    assert store.digest(str(source)) is not None
    store.download(str(source), str(tmp_path / "copy"))
    assert read_tree(tmp_path / "copy") == TREE


# -- digests ------------------------------------------------------------------------------


@KINDS
def test_file_digest_equals_content_digest(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    source = tmp_path / "big.bin"
    data = os.urandom(1 << 16) * 40 + b"tail"  # several 1 MiB chunks and a partial one
    source.write_bytes(data)
    uri = store.uri_for("big")
    store.upload(str(source), uri)
    assert store.digest(uri)[:2] == (content_digest(str(source)).hex, len(data))


@KINDS
def test_directory_digest_equals_content_digest(
    make_store: StoreFactory, tmp_path: Path, kind: str
) -> None:
    store = make_store(kind)
    source = write_tree(tmp_path / "tree")
    uri = store.uri_for("tree")
    store.upload(str(source), uri)
    size = sum(len(data) for data in TREE.values())
    assert store.digest(uri)[:2] == (content_digest(str(source)).hex, size)


@KINDS
def test_digest_changes_with_a_name(make_store: StoreFactory, tmp_path: Path, kind: str) -> None:
    store = make_store(kind)
    store.upload(str(write_tree(tmp_path / "one", {"a": b"1"})), store.uri_for("one"))
    store.upload(str(write_tree(tmp_path / "two", {"b": b"1"})), store.uri_for("two"))
    assert store.digest(store.uri_for("one")) != store.digest(store.uri_for("two"))


@KINDS
def test_digest_of_nothing_is_none(make_store: StoreFactory, kind: str) -> None:
    store = make_store(kind)
    assert store.digest(store.uri_for("missing")) is None


# -- check --------------------------------------------------------------------------------


def test_local_check_creates_the_directory(tmp_path: Path) -> None:
    store = FsspecArtifactStore(str(tmp_path / "new" / "root"))
    store.check()
    assert (tmp_path / "new" / "root").is_dir()
    assert list((tmp_path / "new" / "root").iterdir()) == []  # the probe file is gone


def test_local_check_of_an_unusable_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    store = FsspecArtifactStore(str(tmp_path / "file" / "root"))
    with pytest.raises(StorageError, match="--pipeline-root") as info:
        store.check()
    assert "\n" not in str(info.value)


def test_a_process_private_root_is_refused_by_check() -> None:
    # Each task runs in its own process: a memory:// root would lose every artifact.
    with pytest.raises(StorageError, match="memory://") as info:
        FsspecArtifactStore("memory://anything").check()
    assert "\n" not in str(info.value)
    assert "s3://" in str(info.value)  # names what to use instead


@pytest.mark.parametrize(
    "root", ["sftp://host/x", "zip://a.zip", "local://x"], ids=["sftp", "zip", "local"]
)
def test_an_unknown_root_scheme_is_one_line_naming_the_shared_ones(root: str) -> None:
    with pytest.raises(StorageError, match="known: file, s3, gs") as info:
        FsspecArtifactStore(root)
    assert "\n" not in str(info.value)


# -- store_for and is_remote_uri ------------------------------------------------------------


def test_store_for_caches_per_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    store = store_for("runs")
    assert isinstance(store, ArtifactStore)
    assert store_for(str(tmp_path / "runs")) is store
    assert store_for("memory://cached") is store_for("memory://cached/")
    assert store_for("memory://cached") is not store


def test_store_for_keys_s3_stores_by_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("s3fs")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    first = store_for("s3://bucket/runs")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001")
    second = store_for("s3://bucket/runs")
    assert second is not first
    assert isinstance(first, FsspecArtifactStore)
    assert isinstance(second, FsspecArtifactStore)
    assert (first.endpoint, second.endpoint) == ("http://127.0.0.1:9000", "http://127.0.0.1:9001")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    assert store_for("s3://bucket/runs") is first


@pytest.mark.parametrize(
    ("uri", "remote"),
    [
        ("/tmp/x", False),
        ("relative/x", False),
        ("file:///tmp/x", False),
        ("s3://b/x", True),
        ("gs://b/x", True),
        ("memory://x", True),
    ],
    ids=["absolute", "relative", "file-url", "s3", "gs", "memory"],
)
def test_is_remote_uri(uri: str, remote: bool) -> None:
    assert is_remote_uri(uri) is remote


# -- one digest: what the cache and the store both see -------------------------------------


def tree_with_links(top: Path) -> Path:
    """A directory with a symlink to a file, one to a directory, a dangling one, and a FIFO."""
    write_tree(top)
    os.symlink("a.txt", top / "link-to-file")
    os.symlink(top / "a", top / "link-to-dir")
    os.symlink("/nonexistent/target", top / "dangling")
    os.mkfifo(top / "pipe")
    return top


def test_the_cache_and_the_store_digest_a_tree_with_symlinks_alike(tmp_path: Path) -> None:
    # They used to disagree: the cache hashed a symlink's target path, the store its bytes.
    from headwater.caching.keys import local_digest

    source = tree_with_links(tmp_path / "tree")
    store = FsspecArtifactStore(str(tmp_path / "root"))
    found = store.digest(str(source))
    assert found is not None
    assert local_digest(str(source)) == found.hex
    # An upload (of what the links point at) has the same digest as the tree.
    remote = FsspecArtifactStore(f"memory://hw-{uuid.uuid4().hex}")
    uri = remote.uri_for("tree")
    remote.upload(str(source), uri)
    assert remote.digest(uri)[:2] == found[:2]
    copied = store.uri_for("copy")
    store.upload(str(source), copied)
    assert store.digest(copied)[:2] == found[:2]


@pytest.mark.timeout(30)
def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes, which here is never.
    source = tree_with_links(tmp_path / "tree")
    store = FsspecArtifactStore(str(tmp_path / "root"))
    assert store.digest(str(source / "pipe")) is None
    assert store.signature(str(source / "pipe")) is None
    assert store.digest(str(source)) is not None
    assert content_digest(str(source)) is not None
