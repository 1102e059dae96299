"""The `headwater` CLI as the integration tests start it, and checks on what it returns.

The `headwater` fixture (conftest.py) gives each test a `Cli` whose HEADWATER_HOME is in the
test's tmp_path; test modules import what they use from here::

    from cli_harness import Cli, CliResult, pipeline, run_ok
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

PIPELINES = Path(__file__).parent / "pipelines"


def pipeline(name: str) -> str:
    """The path of pipelines/`name`.py."""
    return str(PIPELINES / f"{name}.py")


def last_json_line(stdout: str) -> dict[str, Any] | None:
    """The JSON object on the last line of `stdout`, or None."""
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        parsed = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


class CliResult(NamedTuple):
    """What one `headwater` invocation produced."""

    returncode: int
    result: dict[str, Any] | None  # the JSON object on the last stdout line (`run --json`)
    stdout: str
    stderr: str

    @classmethod
    def of(cls, returncode: int, stdout: str, stderr: str) -> CliResult:
        return cls(returncode, last_json_line(stdout), stdout, stderr)

    def describe(self) -> str:
        return f"exit {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"

    def json(self) -> Any:
        """The JSON on the last stdout line (a dict for `run`, a list for `runs list`)."""
        assert self.returncode == 0, self.describe()
        lines = self.stdout.strip().splitlines()
        assert lines, self.describe()
        return json.loads(lines[-1])


class Cli(NamedTuple):
    """How to start the CLI in a test: its home, working directory and environment."""

    home: Path
    cwd: Path
    env: dict[str, str]
    # Seconds a command may take, unless the call says otherwise: room for a CI machine under
    # load (one ran the suite 3.5x slower than here); a passing command never waits on it.
    timeout: float = 180
    # Appended to every `run` command: how a test module runs all its pipelines on another
    # executor (`--executor dask --scheduler ADDRESS`) without changing its tests.
    extra_run_args: tuple[str, ...] = ()

    def argv(self, *args: str) -> list[str]:
        extra = self.extra_run_args if args[:1] == ("run",) else ()
        return [sys.executable, "-m", "headwater", *args, *extra]

    def popen(self, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), text=True, env=self.env, cwd=self.cwd, **kwargs)

    def __call__(self, *args: str, timeout: float | None = None) -> CliResult:
        """Run `headwater ARGS...` to completion."""
        proc = subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=self.timeout if timeout is None else timeout,
        )
        return CliResult.of(proc.returncode, proc.stdout, proc.stderr)

    # -- the commands the tests use most ------------------------------------------------------

    def run(self, name: str, *args: str, params: dict[str, Any] | None = None) -> CliResult:
        argv = ["run", pipeline(name), "--json", *args]
        for key, value in (params or {}).items():
            argv += ["--param", f"{key}={value}"]
        return self(*argv)

    def run_ok(self, name: str, *args: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return run_ok(self.run(name, *args, params=params))

    def runs(self, *args: str) -> list[dict[str, Any]]:
        listed = self("runs", "list", "--json", *args).json()
        assert isinstance(listed, list), listed
        return listed

    def show(self, run_id: str) -> dict[str, Any]:
        shown = self("runs", "show", run_id, "--json").json()
        assert isinstance(shown, dict), shown
        return shown


def run_ok(cli: CliResult) -> dict[str, Any]:
    """Assert a successful `run --json` and return its JSON summary."""
    assert cli.returncode == 0, cli.describe()
    assert cli.result is not None, f"no JSON object on the last stdout line:\n{cli.describe()}"
    assert cli.result["state"] == "SUCCEEDED", cli.describe()
    assert isinstance(cli.result["run_id"], str) and cli.result["run_id"], cli.result
    return cli.result


def one_line(cli: CliResult, code: int = 2) -> str:
    """Assert exit `code` (a user error's 2 by default), exactly one stderr line, no
    traceback; return the line."""
    assert cli.returncode == code, cli.describe()
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1, cli.describe()
    assert "Traceback" not in cli.stderr + cli.stdout, cli.describe()
    return lines[0]


def run_failed(cli: CliResult) -> dict[str, Any]:
    """Assert a failed `run --json` (exit 1) and return its JSON summary."""
    assert cli.returncode == 1, cli.describe()
    assert cli.result is not None, f"no JSON object on the last stdout line:\n{cli.describe()}"
    assert cli.result["state"] == "FAILED", cli.describe()
    return cli.result


def task_states(result: dict[str, Any]) -> dict[str, str]:
    names = [task["name"] for task in result["tasks"]]
    assert len(names) == len(set(names)), f"duplicate task names: {sorted(names)}"
    return {task["name"]: task["state"] for task in result["tasks"]}


def cached_flags(result: dict[str, Any]) -> dict[str, bool]:
    return {task["name"]: task["cached"] for task in result["tasks"]}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie awaiting an unrelated parent counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def kill_leftovers(proc: subprocess.Popen[Any], task_pid: int | None = None) -> None:
    """Clean up after a test: kill `proc` if it still runs, and the task process `task_pid`."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if task_pid is not None and not process_gone(task_pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(task_pid, signal.SIGKILL)


def run_in_pty(cli: Cli, *args: str, timeout: float = 30) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as stdin, stdout and stderr; return (exit, output)."""
    master, slave = pty.openpty()
    # 40 rows x 160 columns: a fresh pty reports 0 x 0, which no real terminal does.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        cli.argv(*args), stdin=slave, stdout=slave, stderr=slave, env=cli.env, cwd=cli.cwd
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"no EOF on the pty after {timeout}s; output so far: {chunks!r}")
            readable, _, _ = select.select([master], [], [], 0.2)
            if not readable:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the slave end has closed it
                break
            if not data:
                break
            chunks.append(data)
        returncode = proc.wait(timeout=10)
    finally:
        os.close(master)
        kill_leftovers(proc)
    return returncode, b"".join(chunks).decode("utf-8", "replace")


def build_wheel(directory: Path, value: str) -> Path:
    """Write a minimal pure-Python wheel of package `hwtestpkg` with `VALUE = value`."""
    files = {
        "hwtestpkg/__init__.py": f"VALUE = {value!r}\n",
        "hwtestpkg-0.1.dist-info/METADATA": (
            "Metadata-Version: 2.1\nName: hwtestpkg\nVersion: 0.1\n"
        ),
        "hwtestpkg-0.1.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: headwater-tests\n"
            "Root-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("hwtestpkg-0.1.dist-info/RECORD,,")
    files["hwtestpkg-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / "hwtestpkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel
