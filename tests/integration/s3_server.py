"""A real moto S3 server on loopback for integration tests, one per pytest(-xdist) worker.

Import the fixtures into a test module to use them::

    from s3_server import S3Server  # the fixtures are registered in conftest.py

`moto_server` is session-scoped: under pytest-xdist each worker is its own session, so each
starts its own server on its own free port. `s3_env` points botocore (and so s3fs) at it
through the standard environment variables; `s3_bucket` adds a fresh bucket.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
_START_TIMEOUT_S = 60
_PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint and a way to make buckets on it."""

    endpoint: str

    def client(self) -> Any:
        """A boto3 S3 client for this server; close it when done."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def make_bucket(self) -> str:
        """Create a bucket with a unique name and return the name."""
        name = f"hw-{uuid.uuid4().hex[:12]}"
        with contextlib.closing(self.client()) as client:
            client.create_bucket(Bucket=name)
        return name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _start(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start moto on a free port; retry on another port if someone took it first."""
    for _ in range(_PORT_ATTEMPTS):
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            if _answers(endpoint):
                return proc, endpoint
            time.sleep(0.1)
        _stop(proc)
    raise RuntimeError(f"moto server did not start; see {log}:\n{log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto S3 server for this session (this xdist worker), stopped at the end."""
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc, endpoint = _start(log)
    try:
        yield S3Server(endpoint)
    finally:
        _stop(proc)


@pytest.fixture
def s3_env(moto_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> S3Server:
    """The moto server, with the AWS environment pointing at it and nothing else."""
    for name in (
        "AWS_ENDPOINT_URL_S3",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    # Keep a developer's ~/.aws out of the tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", os.fspath(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.fspath(tmp_path / "aws-credentials"))
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint)
    return moto_server


@pytest.fixture
def s3_bucket(s3_env: S3Server) -> str:
    """A fresh, empty bucket on the moto server (with `s3_env` set)."""
    return s3_env.make_bucket()
