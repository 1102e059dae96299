"""Package environments that are whole: an install killed midway is never used, installs of one
set running at once build it once, and a component's `pip_index_urls` is the index pip uses.

Real parts only: pip installing real wheels (one of 2,000 modules), with its temporary directory
on a tmpfs (/dev/shm) as where the dangling copy was seen, processes killed with SIGKILL, and a
PEP 503 index served over HTTP on loopback.
"""

import base64
import contextlib
import functools
import hashlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kfp import dsl

from headwater.executors.packages import index_options, prepare_packages, requirements
from headwater.spec.loader import ir_from_component

pytestmark = pytest.mark.integration

MODULES = 2000


def wheel(directory: Path, name: str, value: str, modules: int = 0) -> Path:
    """A pure-Python wheel of package `name` with `VALUE = value` and `modules` more modules."""
    files = {f"{name}/__init__.py": f"VALUE = {value!r}\n"}
    files |= {f"{name}/m{i:04d}.py": f"X = {i}\n" for i in range(modules)}
    info = f"{name}-0.1.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: headwater-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return out


def on_tmpfs() -> dict[str, str]:
    """An environment whose temporary directory (pip's) is on a tmpfs."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm tmpfs")
    scratch = shm / f"headwater-test-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    return {"TMPDIR": str(scratch)}


def install_command(home: Path, requirement: str) -> list[str]:
    code = (
        "import sys; from headwater.executors.packages import environment; "
        f"print(environment([{requirement!r}]))"
    )
    return [sys.executable, "-c", code]


def whole(env: Path) -> bool:
    package = env / "hwbig"
    return package.is_dir() and len(list(package.glob("m*.py"))) == MODULES


def test_an_install_killed_midway_is_never_used(tmp_path: Path) -> None:
    big = wheel(tmp_path / "wheels", "hwbig", "big", modules=MODULES)
    home = tmp_path / "home"
    env = {**os.environ, "HEADWATER_HOME": str(home), **on_tmpfs()}
    for _attempt in range(3):  # kill it while pip copies, wherever that lands
        proc = subprocess.Popen(install_command(home, str(big)), env=env, stdout=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            copied = (
                sum(1 for _ in (home / "envs").rglob("m*.py")) if (home / "envs").exists() else 0
            )
            if copied > 50 or proc.poll() is not None:
                break
            time.sleep(0.005)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    done = subprocess.run(install_command(home, str(big)), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    made = Path(done.stdout.strip())
    assert whole(made), "an environment was used with a package half copied"


def test_installs_of_one_set_at_once_build_it_once(tmp_path: Path) -> None:
    big = wheel(tmp_path / "wheels", "hwbig", "big", modules=MODULES)
    home = tmp_path / "home"
    env = {**os.environ, "HEADWATER_HOME": str(home), **on_tmpfs()}
    procs = [
        subprocess.Popen(
            install_command(home, str(big)), env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    made = set()
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        made.add(out.strip())
    assert len(made) == 1
    assert whole(Path(made.pop()))
    log = next((home / "envs").glob("*/install.log")).read_text()
    assert log.count("Successfully installed hwbig-0.1") == 1


@contextlib.contextmanager
def private_index(root: Path) -> Iterator[str]:
    """A PEP 503 simple index of the wheels in `root`, served on loopback."""
    simple = root / "simple" / "hwtestpkg"
    simple.mkdir(parents=True)
    links = "".join(f'<a href="../../{w.name}">{w.name}</a>' for w in root.glob("*.whl"))
    (simple / "index.html").write_text(f"<html><body>{links}</body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    handler = functools.partial(quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def test_pip_index_urls_is_the_index_and_keys_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel(tmp_path / "index", "hwtestpkg", "private")
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    with private_index(tmp_path / "index") as url:

        @dsl.component(base_image="python:3.11", packages_to_install=["hwtestpkg"],
                       pip_index_urls=[url])  # fmt: skip
        def private() -> str:
            import hwtestpkg

            return str(hwtestpkg.VALUE)

        @dsl.pipeline
        def uses_private() -> str:
            return private().output

        ir = ir_from_component(uses_private)
        (executor,) = ir.executors.values()
        assert requirements(executor["container"]) == ["hwtestpkg"]
        assert index_options(executor["container"]) == [
            "--index-url", url, "--trusted-host", url,
        ]  # fmt: skip
        (path,) = prepare_packages(ir, install=True)
    code = "import sys; sys.path.insert(0, sys.argv[1]); import hwtestpkg; print(hwtestpkg.VALUE)"
    shown = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
    assert shown.stdout.strip() == "private"
    assert f"--index-url {url}" in (Path(path) / "install.log").read_text()
