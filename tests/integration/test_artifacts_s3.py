"""`FsspecArtifactStore` against a real S3 server (moto on loopback), found through
`AWS_ENDPOINT_URL` as a MinIO user would configure it."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import Cli
from s3_server import S3Server

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
def store(s3_bucket: str) -> FsspecArtifactStore:
    return FsspecArtifactStore(f"s3://{s3_bucket}/runs")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An endpoint that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_endpoint_comes_from_the_environment(store: FsspecArtifactStore, s3_env: S3Server) -> None:
    assert store.endpoint == s3_env.endpoint


def test_check_passes_for_an_existing_bucket(store: FsspecArtifactStore) -> None:
    store.check()


def test_check_of_a_missing_bucket_is_one_line(s3_env: S3Server) -> None:
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
    s3_env: S3Server,
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


def test_uri_for_starts_with_the_root(store: FsspecArtifactStore, s3_bucket: str) -> None:
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
    s3_bucket: str,
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
    s3_env: S3Server,
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
    s3_env: S3Server,
    s3_bucket: str,
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


# -- bounded calls: timeouts, retries and a progress line --------------------------------------

#: Uploads, downloads and digests through a store whose endpoint never answers; prints each
#: call's error (one line each) and exits 0. The caller bounds how long it may take.
STALLED_CALLS = """
import sys
from headwater.artifacts import FsspecArtifactStore
from headwater.errors import StorageError

store = FsspecArtifactStore("s3://stalled/runs")
uri = store.uri_for("p", "run", "task", "out")
for call in (
    lambda: store.upload(sys.argv[1], uri),
    lambda: store.download(uri, sys.argv[1] + ".down"),
    lambda: store.digest(uri),
):
    try:
        call()
        print("no error")
    except StorageError as exc:
        print(exc)
"""


def stalled_env(endpoint: str, tmp_path: Path, **limits: str) -> dict[str, str]:
    """An environment for a child process whose S3 endpoint is `endpoint`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HEADWATER_S3_"))}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=str(tmp_path / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "aws-credentials"),
        **limits,
    )
    return env


def test_a_stalled_endpoint_fails_each_call_within_its_bound(
    silent_server: str, tmp_path: Path
) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"data")
    script = tmp_path / "stalled.py"
    script.write_text(STALLED_CALLS)
    limits = {
        "HEADWATER_S3_CONNECT_TIMEOUT": "1",
        "HEADWATER_S3_READ_TIMEOUT": "2.5",
        "HEADWATER_S3_RETRIES": "0",
    }
    # Three calls of 1 attempt x (1 + 2.5) s at most; unbounded, each used to take s3fs's 5
    # tries of botocore's 5 attempts of 15 s. (A call says what it waits on after 2 s.)
    proc = subprocess.run(
        [sys.executable, str(script), str(source)],
        capture_output=True,
        text=True,
        env=stalled_env(silent_server, tmp_path, **limits),
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    errors = proc.stdout.strip().splitlines()
    assert len(errors) == 3, proc.stdout
    for line, action in zip(errors, ("upload to", "download", "digest"), strict=True):
        assert line.startswith(f"cannot {action} 's3://stalled/runs/p/run/task/out' at "), line
        assert silent_server in line and "did not answer in time" in line, line
        assert "HEADWATER_S3_READ_TIMEOUT" in line, line
    # While it waited, it said what it was waiting on.
    waited = [line for line in proc.stderr.splitlines() if "still waiting for" in line]
    assert waited, proc.stderr
    assert f"upload to 's3://stalled/runs/p/run/task/out' at {silent_server}" in waited[0]
    assert "gives up after about 3.5 s" in waited[0]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HEADWATER_S3_CONNECT_TIMEOUT", "soon"),
        ("HEADWATER_S3_READ_TIMEOUT", "0"),
        ("HEADWATER_S3_RETRIES", "-1"),
    ],
    ids=["not-a-number", "zero", "negative"],
)
def test_a_bad_limit_is_one_line_naming_it(
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(StorageError, match=name) as info:
        FsspecArtifactStore(f"s3://{s3_bucket}/runs").check()
    assert "\n" not in str(info.value)


class StallingProxy:
    """A TCP proxy on loopback to `target` that, once `flag` exists, accepts new connections
    and never answers them (a stalled endpoint, from the task's upload on)."""

    def __init__(self, target: str, flag: Path) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.flag = flag
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            if self.flag.exists():
                self.held.append(client)
                continue
            upstream = socket.create_connection(self.target)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()
        for sock in self.held:
            sock.close()


def test_a_task_uploading_to_a_stalled_endpoint_fails_within_the_bound(
    headwater: Cli,
    s3_env: S3Server,
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    flag = tmp_path / "stall-now"
    proxy = StallingProxy(s3_env.endpoint, flag)
    try:
        # The engine's settings reach the task through its environment.
        headwater.env.update(
            stalled_env(
                proxy.endpoint,
                tmp_path,
                HEADWATER_S3_CONNECT_TIMEOUT="1",
                HEADWATER_S3_READ_TIMEOUT="2",
                HEADWATER_S3_RETRIES="1",
            )
        )
        cli = headwater.run(
            "storage_s3_stall",
            "--pipeline-root",
            f"s3://{s3_bucket}/root",
            params={"flag": flag},
        )
    finally:
        proxy.close()
    assert cli.returncode == 1, cli.describe()
    assert flag.exists()
    failed = [line for line in cli.stderr.splitlines() if "task 'produce' failed" in line]
    assert len(failed) == 1, cli.describe()
    assert f"cannot upload to 's3://{s3_bucket}/root/" in failed[0], failed[0]
    assert proxy.endpoint in failed[0] and "did not answer in time" in failed[0], failed[0]
