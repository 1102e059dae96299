"""Container images the tests build here, from Debian's packages: no registry is reachable.

* `busybox_image`: a root of busybox-static's applets and a file only the image has
  (`/etc/headwater-image.txt`), imported with `podman import` (well under a second).
* `python_image`: a Debian root with python3 (`mmdebstrap --variant=essential`, ~20 s once
  per machine: the image is kept, and rebuilt only when its name is not there).

Both are made once per machine by whichever xdist worker gets there first (a file lock).
Tests using them are skipped where Podman itself is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable

import pytest

PODMAN = shutil.which("podman")
BUSYBOX = "localhost/headwater-test/busybox:2"
PYTHON = "localhost/headwater-test/python:1"
#: What `/etc/headwater-image.txt` holds in the busybox image.
IMAGE_TEXT = "only the image has this file\n"
_APPLETS = (
    "sh", "cat", "echo", "ls", "mkdir", "sleep", "wc", "head", "tr", "printf", "env", "id",
    "test", "true", "false", "seq", "cp", "grep", "rm", "touch", "dd", "sed", "stat",
)  # fmt: skip

needs_podman = pytest.mark.skipif(PODMAN is None, reason="needs Podman (apt install podman)")


def image_id(name: str, runtime: str | None = None) -> str:
    """The id of image `name` (`sha256:...`), as the runtime (default Podman) reports it."""
    out = subprocess.run(
        [runtime or str(PODMAN), "image", "inspect", "--format", "{{.Id}}", name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out if out.startswith("sha256:") else f"sha256:{out}"


def containers_with(label: str, runtime: str | None = None) -> list[str]:
    """Ids of every container (running or not) with `label` (`key` or `key=value`)."""
    out = subprocess.run(
        [runtime or str(PODMAN), "ps", "-a", "-q", "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def _made(name: str, build: Callable[[], None]) -> str:
    """`name`, built by `build` unless it exists; one builder per machine at a time."""
    if PODMAN is None:
        pytest.skip("needs Podman (apt install podman)")
    lock = os.path.join(tempfile.gettempdir(), "headwater-test-images.lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if subprocess.run([PODMAN, "image", "exists", name], check=False).returncode != 0:
            build()
    return name


def _busybox_root() -> bytes:
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.fail("busybox is not installed: apt install busybox-static")
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for directory, mode in (("bin", 0o755), ("etc", 0o755), ("tmp", 0o1777)):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in _APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        text = IMAGE_TEXT.encode()
        info = tarfile.TarInfo("etc/headwater-image.txt")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return data.getvalue()


@pytest.fixture(scope="session")
def busybox_image() -> str:
    """A busybox image with `/etc/headwater-image.txt`; its name."""

    def build() -> None:
        subprocess.run(
            [str(PODMAN), "import", "--change", "CMD /bin/sh", "-", BUSYBOX],
            input=_busybox_root(),
            capture_output=True,
            check=True,
        )

    return _made(BUSYBOX, build)


@pytest.fixture(scope="session")
def python_image() -> str:
    """A Debian image with python3 (and no pip, no kfp); its name."""

    def build() -> None:
        if shutil.which("mmdebstrap") is None:
            pytest.fail("mmdebstrap is not installed: apt install mmdebstrap")
        root = subprocess.Popen(
            ["mmdebstrap", "--variant=essential", "--include=python3", "--format=tar",
             _codename(), "-"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        imported = subprocess.run(
            [str(PODMAN), "import", "-", PYTHON], stdin=root.stdout, capture_output=True
        )
        _, err = root.communicate()
        if root.returncode != 0 or imported.returncode != 0:
            pytest.fail(f"building {PYTHON} failed: {err.decode()[-2000:]}{imported.stderr!r}")

    return _made(PYTHON, build)


def _codename() -> str:
    with open("/etc/os-release", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    return "bookworm"


@pytest.fixture(scope="session")
def docker_busybox(busybox_image: str) -> str:
    """The busybox image loaded into Docker (from Podman); the docker CLI's path. Skipped where
    no Docker daemon answers (`.ci/run` starts one where it can run)."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        pytest.skip("needs a running Docker daemon")
    lock = os.path.join(tempfile.gettempdir(), "headwater-test-images.lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        found = subprocess.run([docker, "image", "inspect", busybox_image], capture_output=True)
        if found.returncode != 0:
            saved = subprocess.run(
                [str(PODMAN), "save", busybox_image], capture_output=True, check=True
            )
            subprocess.run([docker, "load"], input=saved.stdout, capture_output=True, check=True)
    return docker
