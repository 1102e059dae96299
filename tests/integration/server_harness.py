"""`headwater server` as the server tests start it, and the pipelines they submit with kfp.

No `from __future__ import annotations` here: kfp reads the components' annotations as types.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from kfp import dsl, kubernetes

# The SDK warns about its default base image and the server version; neither matters here.
_QUIET = ["-W", "ignore::FutureWarning"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "HEADWATER_HOME": str(home)}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "HEADWATER_TOKEN"):
        env.pop(name, None)
    return env


def start_server(
    home: Path,
    *args: str,
    port: int | None = None,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[Any], str]:
    """`headwater server` on a loopback port, answering; returns (process, base URL).
    Its stderr goes to `server.log` beside `home`; `env` adds to its environment; `prefix`
    runs it through another command (`unshare ...`)."""
    port = port or free_port()
    home.parent.mkdir(parents=True, exist_ok=True)
    log = home.parent / "server.log"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [
                *prefix,
                sys.executable,
                *_QUIET,
                "-m",
                "headwater",
                "server",
                "--port",
                str(port),
                *args,
            ],
            env={**server_env(home), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"headwater server exited: {log.read_text()}")
        with contextlib.suppress(httpx.TransportError):
            httpx.get(f"{base}/static/style.css", timeout=2)
            return proc, base
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"headwater server did not answer in 30 s: {log.read_text()}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[Any]) -> None:
    """End a server (SIGKILL if SIGTERM does not within 20 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


@contextlib.contextmanager
def running_server(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    proc, base = start_server(home, *args, env=env)
    try:
        yield base
    finally:
        stop(proc)


def wait_state(client: Any, run_id: str, states: tuple[str, ...], timeout: float = 60) -> Any:
    """Poll `get_run` until the run's state is one of `states` (CANCELED too, which
    `wait_for_run_completion` does not stop on)."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.get_run(run_id)
        if run.state in states:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run.state} after {timeout}s, not {states}")
        time.sleep(0.1)


# -- pipelines (compiled by kfp in the tests) --------------------------------------------------


@dsl.component(base_image="python:3.11")
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="adder")
def adder(x: int = 1) -> int:
    first = add(a=x, b=2)
    return add(a=first.output, b=10).output


@dsl.component(base_image="python:3.11")
def count(path: str) -> str:
    with open(path, "a") as f:
        f.write("x")
    return path


@dsl.component(base_image="python:3.11")
def need(path: str, marker: str) -> None:
    import os

    if not os.path.exists(marker):
        raise RuntimeError(f"no marker at {marker}")


@dsl.pipeline(name="flaky")
def flaky(counter: str, marker: str) -> None:
    """`count` runs once per execution of its task; `need` fails until `marker` exists."""
    done = count(path=counter)
    need(path=done.output, marker=marker)


@dsl.component(base_image="python:3.11")
def hold(pid_file: str, gate: str) -> None:
    """Write this process's pid, then wait (up to 60 s) for the `gate` file."""
    import os
    import time

    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    for _ in range(600):
        if os.path.exists(gate):
            return
        time.sleep(0.1)


@dsl.pipeline(name="held")
def held(counter: str, pid_file: str, gate: str) -> None:
    done = count(path=counter)
    hold(pid_file=pid_file, gate=gate).after(done)


def kfp_client(base: str, **kwargs: Any) -> Any:
    """`kfp.Client` for `base` (its warning that it needs KFP 2.0.0-beta.2 silenced)."""
    import warnings

    import kfp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return kfp.Client(host=base, **kwargs)


@dsl.pipeline(name="looped")
def looped() -> None:
    with dsl.ParallelFor([1, 2]) as item:
        add(a=item, b=1)


@dsl.component(base_image="python:3.11")
def password_digest() -> str:
    """The first 12 hex digits of the SHA-256 of `$DB_PASSWORD` (never the value)."""
    import hashlib
    import os

    return hashlib.sha256(os.environ["DB_PASSWORD"].encode()).hexdigest()[:12]


@dsl.pipeline(name="with-secret")
def with_secret() -> str:
    """kfp-kubernetes' `use_secret_as_env`: key `password` of secret `db` as `DB_PASSWORD`."""
    task = password_digest()
    kubernetes.use_secret_as_env(task, "db", {"password": "DB_PASSWORD"})
    return task.output


@dsl.pipeline(name="two-adds")
def two_adds() -> int:
    return add(a=add(a=1, b=2).output, b=3).output


def wheel_pipeline(package: str) -> Any:
    """A pipeline whose one task installs `package` (a wheel's path, say) and returns
    `hwtestpkg.VALUE` and where the module was imported from, as `VALUE@file`."""

    def use_wheel() -> str:
        import hwtestpkg

        return f"{hwtestpkg.VALUE}@{hwtestpkg.__file__}"

    component = dsl.component(base_image="python:3.11", packages_to_install=[package])(use_wheel)

    @dsl.pipeline(name="use-wheel")
    def use_wheel_pipeline() -> str:
        return component().output

    return use_wheel_pipeline


@dsl.component(base_image="python:3.11")
def make(text: str, data: dsl.Output[dsl.Dataset], model: dsl.Output[dsl.Model]) -> None:
    """A file (`data`) and a folder (`model`)."""
    import os

    with open(data.path, "w") as f:
        f.write(text)
    os.makedirs(model.path, exist_ok=True)
    with open(os.path.join(model.path, "weights.txt"), "w") as f:
        f.write(text * 2)


@dsl.component(base_image="python:3.11")
def size(data: dsl.Input[dsl.Dataset]) -> int:
    with open(data.path) as f:
        return len(f.read())


@dsl.pipeline(name="made")
def made(text: str = "hello", branch: bool = False) -> None:
    """Artifacts to read back, and a branch that is taken only when asked."""
    made_task = make(text=text)
    size(data=made_task.outputs["data"])
    with dsl.If(branch == True):  # noqa: E712 - KFP's condition syntax
        add(a=1, b=2)


@dsl.component(base_image="python:3.11")
def mark(path: str, token: str) -> str:
    """Append `token` and this process's pid to `path` once the work is done."""
    import os
    import time

    time.sleep(0.05)
    with open(path, "a") as f:
        f.write(f"{token} {os.getpid()}\n")
    return token


@dsl.pipeline(name="marked")
def marked(path: str, token: str) -> str:
    return mark(path=path, token=token).output
