"""The endpoints' process supervisor: model servers that outlive what deployed them.

`deploy(spec, name=...)` starts `headwater serve NAME=SPEC` as a service of its own (its own
session, `HEADWATER_SERVICE` in its environment, so the fork server leaves it running when the
deploying task ends, see `headwater.executors.forkserver`), waits until it answers ready, and
records it in the metadata store's `endpoints` table under `name`. Deploying to a name that
is already running updates that server instead:

* the same model and settings: nothing changes;
* another model, same settings: the server loads the new version through its admin API and
  then unloads the old one (every worker process, see `headwater.serving.admin`); requests in
  flight finish on the old one, so none is dropped;
* otherwise (other workers, host or port): the old server is stopped, then a new one started
  on the same port (a short gap without a server).

`stop(name)` ends a server (SIGTERM to its process group: requests in flight are answered,
then SIGKILL after `timeout`) and records it stopped. `state_of(record)` tells whether a
recorded server still lives: by its process id and start time on this machine (a reused id
is not taken for it), by an HTTP probe when it runs on another.

A server's output goes to `$HEADWATER_HOME/endpoints/NAME.log`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from headwater import config
from headwater.endpoints.settings import DeploySettings
from headwater.errors import InvalidArgumentError, NotFoundError, UserError
from headwater.executors.forkserver import SERVICE_ENV
from headwater.metadata.base import EndpointRecord, MetadataStore
from headwater.processes import process_alive, process_start
from headwater.security import check_bind, read_token
from headwater.serving.resolve import NAME_PATTERN, resolve

if TYPE_CHECKING:
    from headwater.sandbox.policy import SandboxPolicy

#: How long `deploy` waits for a new server to answer ready (loading torch takes a while).
READY_TIMEOUT_S = 300.0
#: How long `stop` lets a server finish its requests before SIGKILL.
STOP_TIMEOUT_S = 30.0
_SERVING_ON = re.compile(r"serving on (http://\S+)")
_WILDCARD = ("0.0.0.0", "::", "")


def endpoints_dir() -> Path:
    """Where servers' logs go: `$HEADWATER_HOME/endpoints`."""
    return config.home() / "endpoints"


def deploy(
    spec: str,
    *,
    name: str,
    store: MetadataStore,
    metadata_url: str,
    settings: DeploySettings,
    run_id: str | None = None,
    task: str | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
    sandbox: SandboxPolicy | None = None,
) -> tuple[EndpointRecord, str]:
    """Start (or update) the server `name` serving the model `spec` and record it.

    With `sandbox` (a sandboxed run's deploy), the server runs in a sandbox of its own that
    shows the model's files read-only and no store: it serves the model by its path (a new
    model restarts it, which cannot see another file).

    Args:
        spec: A MODEL spec without an alias (`NAME`, `NAME:VERSION`, `NAME@STAGE`, an
            artifact URI or a path; see `headwater.serving.resolve`).
        name: The endpoint's name: the server's, and the model's in its URLs.
        store: The metadata store to record it in (and to resolve registry names from).
        metadata_url: The same store's URL, for the server process.
        settings: How the server runs (host, port, workers, batching).
        run_id: The run deploying it (recorded).
        task: The task deploying it (recorded).
        ready_timeout: Seconds to wait for a new server to answer ready.
        sandbox: The sandbox of a sandboxed run's server (see above); None: none.

    Returns:
        The endpoint as recorded, and what was done: "started", "updated", "restarted"
        or "unchanged".

    Raises:
        InvalidArgumentError: A bad name, port, workers or batching, or a non-loopback host
            without a token.
        UserError: The model spec names nothing servable, or the server did not start (the
            message has the last lines of its log).
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidArgumentError(
            f"endpoint name {name!r} must be letters, digits and '_.-' (it goes into URLs)"
        )
    settings.check()
    check_bind(settings.host, read_token())
    source = resolve(f"{name}={spec}", metadata=store)
    # Pin a registry name to the version it names now, so the server serves what we record;
    # a file by its absolute path (the server's working directory may not be ours).
    pinned = source.registered or source.uri or source.path or spec
    if sandbox is not None:
        pinned = source.path or source.uri or spec
    model = {
        "name": name,
        "version": source.version,
        "spec": pinned,
        "registered": source.registered,
        "uri": source.uri or source.path,
        "framework": source.framework,
    }
    with _locked(name):
        existing = store.get_endpoint(name)
        action = "started"
        if existing is not None and state_of(existing) == "running":
            settings = replace(
                settings,
                port=settings.port
                or int(existing.config.get("port") or 0)
                or _port_of(existing.url),
            )
            # A setting newer than the record has its default there (not a change).
            recorded = {**DeploySettings().to_config(), **existing.config, "port": settings.port}
            same_settings = recorded == settings.to_config()
            served = existing.models[0] if existing.models else {}
            if same_settings and _same_model(served, model):
                return existing, "unchanged"
            if same_settings and sandbox is None:
                swapped = _swap_model(existing, pinned)
                updated = replace(
                    existing, models=[{**model, "version": swapped}], run_id=run_id, task=task
                )
                return store.save_endpoint(updated), "updated"
            stop_process(existing)
            action = "restarted"

        def record(started: EndpointRecord) -> None:
            store.save_endpoint(replace(started, models=[model], run_id=run_id, task=task))

        started = _start(pinned, name, settings, metadata_url, ready_timeout, record, sandbox)
        return store.get_endpoint(name) or started, action


def stop(
    name: str, store: MetadataStore, *, timeout: float = STOP_TIMEOUT_S
) -> tuple[EndpointRecord, bool]:
    """Stop the server recorded as `name` and record it stopped.

    Returns:
        The record, and True if a running server was stopped (False: it had already ended).

    Raises:
        NotFoundError: No endpoint has that name (the message lists those there are).
        UserError: The server runs on another machine (stop it there).
    """
    record = store.get_endpoint(name)
    if record is None:
        names = ", ".join(e.name for e in store.list_endpoints()) or "none"
        raise NotFoundError(
            f"no endpoint named {name!r} (endpoints: {names}); see headwater endpoints list"
        )
    if record.host != socket.gethostname() and record.state == "running":
        raise UserError(
            f"endpoint {name!r} runs on {record.host}, not on this machine: run headwater "
            "endpoints stop there"
        )
    with _locked(name):
        record = store.get_endpoint(name) or record  # as it is now, not before the lock
        stopped = stop_process(record, timeout=timeout)
        return store.save_endpoint(replace(record, state="stopped")), stopped


def state_of(record: EndpointRecord) -> str:
    """The server's state now: "running", "stopped" (recorded so), "exited" (its process is
    gone) or "unreachable" (on another machine and not answering)."""
    if record.state == "stopped":
        return "stopped"
    if record.host == socket.gethostname():
        return "running" if process_alive(record.pid, record.started) else "exited"
    return "running" if _ready(record.url, timeout=2.0, path="/v2/health/live") else "unreachable"


def stop_process(record: EndpointRecord, *, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM the server's process group, SIGKILL it after `timeout`; True if it was alive."""
    if record.host != socket.gethostname() or not process_alive(record.pid, record.started):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # our child (deployed from here): reap it
            os.waitpid(record.pid, os.WNOHANG)
        if not process_alive(record.pid, record.started):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGKILL)
    while process_alive(record.pid, record.started) and time.monotonic() < deadline + 5:
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One deploy or stop of endpoint `name` at a time on this machine (two runs deploying
    one name must not start two servers)."""
    import fcntl

    folder = endpoints_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start(
    spec: str,
    name: str,
    settings: DeploySettings,
    metadata_url: str,
    ready_timeout: float,
    record: Callable[[EndpointRecord], None],
    sandbox: SandboxPolicy | None = None,
) -> EndpointRecord:
    """Start `headwater serve NAME=SPEC` as a service and wait until it answers ready.

    The server is recorded (`record`) as soon as it is spawned, without a URL yet, so that
    a deploy interrupted while it loads leaves a server `endpoints stop` can find; then again
    once it is ready, or as stopped when it failed.
    """
    folder = endpoints_dir()
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{name}.log"
    argv = [sys.executable, "-m", "headwater", "serve", f"{name}={spec}", *settings.serve_args()]
    env = {**os.environ, SERVICE_ENV: f"endpoint:{name}", config.METADATA_URL_ENV: metadata_url}
    if sandbox is not None:  # the model's files only, no store: `spec` is its path
        from headwater.sandbox.command import sandboxed_argv

        argv, env = sandboxed_argv(
            argv,
            sandbox,
            readable=[spec],
            env={SERVICE_ENV: f"endpoint:{name}", config.METADATA_URL_ENV: "sqlite://"},
            lasting=True,
        )
    with log_path.open("ab") as log:
        offset = log.tell()
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv[1:])}\n".encode())
        log.flush()
        # Spawned, not a Popen: nothing here waits for it or warns when it outlives us. Its own
        # session makes it its own process group: not the task's, and stoppable as one.
        pid = os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, log.fileno(), 2),
            ],
            setsid=True,
        )
    spawned = EndpointRecord(
        name=name,
        url="",
        host=socket.gethostname(),
        pid=pid,
        started=process_start(pid),
        config=settings.to_config(),
        state="running",
        log_path=str(log_path),
    )
    try:
        record(spawned)
        url = _wait_announced(pid, log_path, offset, ready_timeout)
        host = str(settings.host)
        if host in _WILDCARD:
            url = url.replace(f"//{host}:", f"//{socket.getfqdn()}:", 1)
        probe = _probe_url(url, host)
        deadline = time.monotonic() + ready_timeout
        while not _ready(probe):
            if _exited(pid) or time.monotonic() > deadline:
                _give_up(pid, log_path, offset, "did not become ready")
            time.sleep(0.1)
    except UserError:
        record(replace(spawned, state="stopped"))
        raise
    ready = replace(spawned, url=url, config=dict(settings.to_config(), port=_port_of(url)))
    record(ready)
    return ready


def _wait_announced(pid: int, log_path: Path, offset: int, timeout: float) -> str:
    """The URL the server announces in its log once it has bound and loaded its models."""
    deadline = time.monotonic() + timeout
    while True:
        found = _SERVING_ON.search(_log_since(log_path, offset))
        if found:
            return found.group(1)
        if _exited(pid):
            _give_up(pid, log_path, offset, "exited")
        if time.monotonic() > deadline:
            _give_up(pid, log_path, offset, f"did not start within {timeout:g} s")
        time.sleep(0.05)


def _exited(pid: int) -> bool:
    """True if our child `pid` has ended (and is reaped now)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _give_up(pid: int, log_path: Path, offset: int, why: str) -> NoReturn:
    if not _exited(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    lines = [line for line in _log_since(log_path, offset).splitlines()[1:] if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    said = (
        (errors or lines or ["(no output)"])[-1].removeprefix("headwater: ").removeprefix("error: ")
    )
    raise UserError(f"the model server {why}: {said} (full log: {log_path})")


def _log_since(log_path: Path, offset: int) -> str:
    with log_path.open("rb") as fh:
        fh.seek(offset)
        return fh.read().decode(errors="replace")


def _probe_url(url: str, host: str) -> str:
    """`url` as this machine reaches it (a wildcard bind is reached on loopback)."""
    if host in _WILDCARD:
        return f"http://127.0.0.1:{_port_of(url)}"
    return url


def _ready(url: str, *, timeout: float = 1.0, path: str = "/v2/health/ready") -> bool:
    try:
        with _request(url + path, timeout=timeout) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def _request(url: str, body: dict[str, Any] | None = None, *, timeout: float = 60.0) -> Any:
    headers = {"Content-Type": "application/json"}
    token = read_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    return urllib.request.urlopen(request, timeout=timeout)


def _admin(record: EndpointRecord, action: str, body: dict[str, Any]) -> dict[str, Any]:
    base = _probe_url(record.url, str(record.config.get("host", "127.0.0.1")))
    url = f"{base}/admin/models/{record.name}/{action}"
    try:
        with _request(url, body, timeout=READY_TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            why = exc.reason
        raise UserError(f"endpoint {record.name!r} refused to {action} the model: {why}") from exc
    except OSError as exc:
        raise UserError(f"endpoint {record.name!r} at {record.url} did not answer: {exc}") from exc


def _swap_model(record: EndpointRecord, spec: str) -> str:
    """Load `spec` into the running server as its default version, then unload the others;
    the version label it got."""
    loaded = _admin(record, "load", {"model": spec})
    version = str(loaded["loaded"])
    for old in loaded.get("versions", []):
        if str(old) != version:
            _admin(record, "unload", {"version": str(old)})
    return version


def _same_model(served: dict[str, Any], model: dict[str, Any]) -> bool:
    if served.get("registered") or model.get("registered"):
        return bool(served.get("registered") == model.get("registered"))
    return bool(served.get("uri") == model.get("uri"))


def _port_of(url: str) -> int:
    tail = url.rstrip("/").rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


__all__ = [
    "deploy",
    "endpoints_dir",
    "state_of",
    "stop",
    "stop_process",
]
