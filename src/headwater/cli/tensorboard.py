"""`headwater tensorboard RUN_ID`: serve the TensorBoard logs a run's tasks wrote.

A TensorBoard log folder is any output artifact that is a directory with `events.out.tfevents*`
files somewhere below it (`train_lightning` writes its `tensorboard` output so). Each becomes a
group of TensorBoard runs named after its task (`train`, `trial[2]` for a loop iteration; a
task with several such outputs gives `task/output`). Artifacts on a remote store (s3://, gs://)
are downloaded to a temporary folder first; finding event files there would mean downloading
everything, so only outputs marked as logs (metadata `format: tensorboard-logs`, as
`train_lightning` writes, or an output named `tensorboard`) are fetched.

TensorBoard runs as a child process (`python -m tensorboard.main --logdir_spec ...`) on
loopback only: it has no login, so, as for every Headwater server, nothing else is exposed
(reach it from another machine through a tunnel, `ssh -L 6006:127.0.0.1:6006 HOST`). Ctrl-C or
SIGTERM, the way to stop a server, stops it and exits 0; an interrupt while it is starting
exits 130, as every command does.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from headwater._deps import require_installed
from headwater.errors import (
    HeadwaterError,
    InvalidArgumentError,
    NotFoundError,
    UserError,
)
from headwater.task import split_iterations

if TYPE_CHECKING:
    import subprocess

    from headwater.api._store import MetadataArg
    from headwater.api.runs import RunDetails, TaskDetails

EVENTS_PREFIX = "events.out.tfevents"
#: The artifact metadata `format` that marks TensorBoard logs (set by `train_lightning`).
LOGS_FORMAT = "tensorboard-logs"
#: Seconds TensorBoard may take to answer after it starts (it loads plugins first).
START_TIMEOUT_S = 120.0


# subprocess, socket and the like are imported where used: every CLI command imports this
# module (to build the parser), and `headwater run` starts in tens of milliseconds.


class LogDir(NamedTuple):
    """One TensorBoard log folder: its group name, local path, and where it came from."""

    name: str
    path: str
    task: str
    output: str
    uri: str


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `tensorboard` on the CLI's subparsers."""
    tb = sub.add_parser(
        "tensorboard",
        help="serve a run's TensorBoard logs (what train_lightning writes) on loopback",
    )
    tb.add_argument("run_id", help="a run id (a unique prefix is enough)")
    tb.add_argument(
        "--task", metavar="NAME", help="only this task's logs (a loop's name: all iterations)"
    )
    tb.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    tb.add_argument("--port", type=int, default=6006, help="the port to serve on (default 6006)")


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """`headwater tensorboard RUN_ID [--task NAME] [--host H] [--port P]`."""
    from headwater.api.runs import get_run

    host = _loopback(args.host)
    port = _port(args.port)
    _require_tensorboard()
    run = get_run(args.run_id, metadata=args.metadata_url)
    # SIGTERM stops the command as Ctrl-C does, so that TensorBoard is never left behind.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if in_main else None
    try:
        with _scratch() as scratch:
            logs = find_logdirs(run, task=args.task, scratch=scratch, metadata=args.metadata_url)
            _check_free(host, port)
            with _tensorboard(logdir_spec(logs, scratch), host, port) as child:
                url = f"http://{_url_host(host)}:{port}/"
                return _serve(child, f"TensorBoard for run {run.run_id} at {url} (Ctrl-C to stop)")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def find_logdirs(
    run: RunDetails, *, task: str | None, scratch: Callable[[], str], metadata: MetadataArg = None
) -> list[LogDir]:
    """The TensorBoard log folders among the output artifacts of `run`'s tasks.

    Args:
        run: The run, as `headwater.api.runs.get_run` returns it.
        task: Only this task's outputs: a task's name, or a loop task's name without `[i]`
            (every iteration). None for every task.
        scratch: A callable giving a new empty local folder, where remote logs are downloaded.
        metadata: The metadata store, to read a remote artifact's type and metadata.

    Raises:
        InvalidArgumentError: No task is called `task`.
        NotFoundError: No output is a TensorBoard log folder.
    """
    tasks = [t for t in run.tasks if task is None or task in (t.name, split_iterations(t.name)[0])]
    if task is not None and not tasks:
        raise InvalidArgumentError(
            f"run {run.run_id} has no task {task!r} (tasks: {_names(run.tasks)}): pass one of "
            "them to --task, or leave --task out"
        )
    found: list[LogDir] = []
    for t in tasks:
        dirs = [
            (slot, uri, path)
            for slot, uri in _outputs(t)
            if (path := _local_logdir(slot, uri, scratch, metadata)) is not None
        ]
        for slot, uri, path in dirs:
            name = t.name if len(dirs) == 1 else f"{t.name}/{slot}"
            found.append(LogDir(name, path, t.name, slot, uri))
    if not found:
        where = f"task {task!r} of run {run.run_id}" if task else f"run {run.run_id}"
        raise NotFoundError(
            f"{where} has no TensorBoard logs (tasks: {_names(tasks)}); train with "
            "train_lightning to produce them"
        )
    return found


def logdir_spec(logs: list[LogDir], scratch: Callable[[], str]) -> str:
    """TensorBoard's `--logdir_spec`: `name:path,...`, names made unique and free of the `,`
    and `:` the flag splits on (a path with a comma is reached through a symlink)."""
    parts: list[str] = []
    seen: set[str] = set()
    for log in logs:
        base = log.name.replace(",", "_").replace(":", "_")
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base}#{n}"
        seen.add(name)
        path = log.path
        if "," in path:
            path = os.path.join(scratch(), "logs")
            os.symlink(log.path, path)
        parts.append(f"{name}:{path}")
    return ",".join(parts)


def _outputs(task: TaskDetails) -> Iterator[tuple[str, str]]:
    for slot, uris in sorted(task.output_artifacts.items()):
        for uri in uris:
            yield slot, uri


def _local_logdir(
    slot: str, uri: str, scratch: Callable[[], str], metadata: MetadataArg
) -> str | None:
    """The local folder of the artifact at `uri` if it holds event files; None otherwise."""
    from headwater.paths import is_remote_uri, local_path

    path = local_path(uri)
    if path is None and is_remote_uri(uri) and _marked_as_logs(slot, uri, metadata):
        from headwater.artifacts import store_for

        target = os.path.join(scratch(), "logs")
        print(f"headwater: downloading TensorBoard logs {uri}", file=sys.stderr, flush=True)
        store_for(uri).download(uri, target)
        path = target
    if path is None or not os.path.isdir(path) or not _has_events(path):
        return None
    return os.path.abspath(path)


def _marked_as_logs(slot: str, uri: str, metadata: MetadataArg) -> bool:
    from headwater.api.artifacts import get_artifact

    if slot == "tensorboard":
        return True
    try:
        art = get_artifact(uri, metadata=metadata)
    except NotFoundError:
        return False
    return art.metadata.get("format") == LOGS_FORMAT


def _has_events(path: str) -> bool:
    return any(f.startswith(EVENTS_PREFIX) for _, _, files in os.walk(path) for f in files)


def _names(tasks: list[TaskDetails]) -> str:
    return ", ".join(t.name for t in tasks) or "none"


def _loopback(host: str) -> str:
    """`host` if it is a loopback address or name; TensorBoard has no login to guard more."""
    from headwater.security import is_loopback

    if not is_loopback(host):
        raise InvalidArgumentError(
            f"--host {host!r} is not a loopback address: TensorBoard has no login, so headwater "
            "serves it on 127.0.0.1, ::1 or localhost only; from another machine, use a tunnel "
            "(ssh -L 6006:127.0.0.1:6006 THIS_HOST)"
        )
    return host.strip("[]")  # `[::1]` is how a URL writes ::1; sockets take it bare


def _port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise InvalidArgumentError(f"--port {port} is not a TCP port: give one from 1 to 65535")
    return port


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _require_tensorboard() -> None:
    # Checked, not imported: TensorBoard runs in a process of its own.
    require_installed(["tensorboard"], "torch", "headwater tensorboard")


def _check_free(host: str, port: int) -> None:
    """Refuse a port another server listens on, before starting TensorBoard (which would
    fail there only after seconds of loading)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As TensorBoard's server does: a port in TIME_WAIT is free to take.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UserError(
                f"cannot serve on {host} port {port}: {exc.strerror or exc}; pass --port with "
                "a free port"
            ) from exc


@contextlib.contextmanager
def _scratch() -> Iterator[Callable[[], str]]:
    """A callable that gives new empty folders, all removed on exit (made only if asked)."""
    import shutil
    import tempfile

    made: list[str] = []

    def new() -> str:
        made.append(tempfile.mkdtemp(prefix="headwater-tensorboard-"))
        return made[-1]

    try:
        yield new
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


class _Child:
    """The TensorBoard process, with the last lines it printed (for an error message)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self._reader = threading.Thread(target=self._drain, name="tensorboard-output")
        self._reader.daemon = True
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.tail.append(line.strip())

    def failure(self) -> str:
        """Why TensorBoard stopped: its own error line, else its exit status."""
        self._reader.join(timeout=2)
        lines = [line for line in self.tail if "ERROR" in line or "Error" in line]
        last = (lines or list(self.tail) or [f"exit status {self.proc.returncode}"])[-1]
        return last.removeprefix("ERROR: ")

    def stop(self) -> None:
        """SIGTERM (TensorBoard exits 0 on it), then SIGKILL if it lingers or the wait is
        interrupted (a second Ctrl-C): it is never left running."""
        import subprocess

        if self.proc.poll() is not None:
            return
        try:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def _tensorboard(spec: str, host: str, port: int) -> Iterator[_Child]:
    """Start TensorBoard; yield once it answers HTTP; stop it on exit, whatever happened."""
    import subprocess

    argv = [sys.executable, "-m", "tensorboard.main", "--logdir_spec", spec]
    argv += ["--host", host, "--port", str(port)]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    child = _Child(proc)
    try:
        _wait_until_up(child, host, port)
        yield child
    finally:
        child.stop()


def _wait_until_up(child: _Child, host: str, port: int) -> None:
    import json
    import urllib.error
    import urllib.request

    url = f"http://{_url_host(host)}:{port}/data/environment"
    deadline = time.monotonic() + START_TIMEOUT_S
    while child.proc.poll() is None:
        with (
            contextlib.suppress(OSError, ValueError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as answer,
        ):
            if "data_location" in json.loads(answer.read()):
                return
        if time.monotonic() > deadline:
            raise HeadwaterError(
                f"TensorBoard did not answer on {url} within {START_TIMEOUT_S:.0f} s "
                f"(its last line: {child.failure()})"
            )
        time.sleep(0.2)
    raise HeadwaterError(f"TensorBoard did not start: {child.failure()}")


def _serve(child: _Child, banner: str) -> int:
    """Print `banner`, then wait for Ctrl-C or SIGTERM (exit 0), or for TensorBoard to end by
    itself (an error). The banner is printed inside the wait's `try`: a user who stops the
    command as soon as it says where to look is stopping a running server."""
    try:
        print(banner, flush=True)
        child.proc.wait()
    except KeyboardInterrupt:
        return 0
    raise HeadwaterError(f"TensorBoard stopped: {child.failure()}")


def _interrupt(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt
