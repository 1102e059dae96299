"""Running the model server: one uvicorn process, or several sharing one listening socket.

`serve(config)` binds the socket itself (so a busy port is one clear error, and `port=0`
gets a free one), loads the models, then:

* with one worker, runs uvicorn in this process on the loaded app;
* with N workers, checks that every model loads here, writes the config to a private file
  named by `HEADWATER_SERVE_CONFIG`, and lets uvicorn's supervisor start N processes, each
  building its app with `app_from_environment` (every worker loads every model) and
  accepting on the shared socket. The supervisor restarts a worker that dies.

Either way the server stops gracefully on SIGINT/SIGTERM: requests in flight are answered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.config import SERVE_CHANGES_ENV, SERVE_CONFIG_ENV, serve_changes, serve_config
from headwater.errors import UserError
from headwater.security import check_bind, hosts_for_bind
from headwater.serving.config import ServerConfig
from headwater.serving.repository import ModelRepository

if TYPE_CHECKING:
    from fastapi import FastAPI

#: Names the JSON file holding a `ServerConfig` for the worker processes.
CONFIG_ENV = SERVE_CONFIG_ENV
#: Names the file the worker processes share their admin changes through (`ChangeLog`).
CHANGES_ENV = SERVE_CHANGES_ENV
#: The import string uvicorn's workers build their app with.
APP_FACTORY = "headwater.serving.server:app_from_environment"
#: Seconds a stopping server waits for requests in flight.
GRACEFUL_SHUTDOWN_S = 30


def serve(config: ServerConfig, *, announce: Callable[[str], None] = lambda line: None) -> None:
    """Serve `config.sources` until interrupted.

    Args:
        config: The settings.
        announce: Called with a line per model and one with the server's URL, once it is
            bound and the models are loaded.

    Raises:
        InvalidArgumentError: A non-loopback host without a token, or an allowed host that
            is not a host name.
        UserError: The address cannot be bound, or a model fails to load.
    """
    import uvicorn

    from headwater.serving.app import create_app

    check_bind(config.host, config.token)
    hosts = hosts_for_bind(config.host, config.allowed_hosts)
    sock = bind(config.host, config.port)
    with contextlib.closing(sock):
        repository = build_repository(config)
        port = sock.getsockname()[1]
        for source in config.sources:
            announce(f"model {source.describe()}")
        for canary in config.canaries:
            policy = repository.endpoint(canary.source.name).state.policy
            label = str(getattr(policy, "canary", canary.source.version))  # as numbered
            source = dataclasses.replace(canary.source, version=label)
            announce(f"canary {source.describe()} taking {canary.percent:g}% of traffic")
        for name, batching in config.batching.items():
            announce(
                f"batching {name!r}: up to {batching.max_batch_size} requests, waiting at most "
                f"{batching.max_latency_ms:g} ms"
            )
        host = f"[{config.host}]" if ":" in config.host else config.host
        workers = f" with {config.workers} workers" if config.workers > 1 else ""
        announce(f"serving on http://{host}:{port}{workers} (KServe V1 /v1/models, V2 /v2)")
        if config.grpc_port is not None:
            check_free(config.host, config.grpc_port)
            announce(f"the inference protocol over gRPC on {host}:{config.grpc_port}")
        if config.workers == 1:
            app = create_app(
                repository,
                token=config.token,
                max_body_bytes=config.max_body_bytes,
                allowed_hosts=hosts,
                grpc=_grpc(config),
            )
            settings = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            )
            server = uvicorn.Server(settings)
            with _stop_signals_as_interrupts():
                try:
                    server.run(sockets=[sock])
                except KeyboardInterrupt:
                    # uvicorn re-raises the stop signal once it has shut down gracefully:
                    # a served-and-stopped server is a normal end (as `uvicorn.run` has it).
                    if not server.started:
                        raise
            return
        repository.close()  # it loaded: each worker loads its own copy
        from uvicorn.supervisors import Multiprocess

        with _config_file(config) as path:
            os.environ[CONFIG_ENV] = str(path)
            os.environ[CHANGES_ENV] = str(path.with_name("admin-changes.jsonl"))
            try:
                settings = uvicorn.Config(
                    APP_FACTORY,
                    factory=True,
                    workers=config.workers,
                    log_level="warning",
                    access_log=False,
                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                )
                Multiprocess(settings, sockets=[sock]).run()
            finally:
                os.environ.pop(CONFIG_ENV, None)
                os.environ.pop(CHANGES_ENV, None)


def app_from_environment() -> FastAPI:
    """The app of one worker process, from the config file `HEADWATER_SERVE_CONFIG` names.

    With `HEADWATER_SERVE_CHANGES` set, the worker shares admin changes with the others
    through that file (`headwater.serving.admin.ChangeLog`): it replays the changes made
    before it started (a restarted worker catches up) before it takes a request.
    """
    from headwater.serving.admin import change_log
    from headwater.serving.app import create_app

    path = serve_config()
    if not path:
        raise UserError(f"{CONFIG_ENV} is not set: start workers with headwater serve")
    config = ServerConfig.from_json(json.loads(Path(path).read_text()))
    repository = build_repository(config)
    changes = None
    shared = serve_changes()
    if shared:
        changes = change_log(shared, repository)
        changes.start()
    return create_app(
        repository,
        token=config.token,
        max_body_bytes=config.max_body_bytes,
        change_log=changes,
        allowed_hosts=hosts_for_bind(config.host, config.allowed_hosts),
        grpc=_grpc(config),
    )


def _grpc(config: ServerConfig) -> tuple[str, int] | None:
    return None if config.grpc_port is None else (config.host, config.grpc_port)


def check_free(host: str, port: int) -> None:
    """Refuse a port something listens on already: gRPC's own bind shares a port with any
    other `SO_REUSEPORT` socket of this user (another server's), as its workers share it.

    Raises:
        UserError: The port is taken.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            raise UserError(
                f"cannot listen for gRPC on {host}:{port}: {exc.strerror}: choose another "
                "--grpc-port"
            ) from exc


def build_repository(config: ServerConfig) -> ModelRepository:
    """The endpoints `config` asks for, loaded: its sources, each endpoint with a batching
    predictor where `config.batching` names it, then the canaries with their traffic split.
    A canary from a file (not the registry) whose version label is taken is numbered after
    the endpoint's versions ("2" beside "1").

    Raises:
        UserError: A model fails to load, or a canary names no served model or a version
            already served; whatever loaded is unloaded.
    """
    from headwater.serving.batching import BatchingPredictor
    from headwater.serving.config import Canary
    from headwater.serving.endpoint import ModelEndpoint
    from headwater.serving.traffic import CanaryPolicy

    repository = ModelRepository()
    try:
        for name in dict.fromkeys(s.name for s in config.sources):
            batching = config.batching.get(name)
            if batching is not None and batching.max_batch_size > 1:
                predictor = BatchingPredictor(
                    max_batch_size=batching.max_batch_size,
                    max_latency_ms=batching.max_latency_ms,
                )
                repository.add(ModelEndpoint(name, predictor=predictor))
        for source in config.sources:
            repository.add_model(source)
        names = [c.source.name for c in config.canaries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UserError(
                f"--canary names model {twice[0]!r} twice: a model has one canary at a time"
            )
        for canary in config.canaries:
            name, version = canary.source.name, canary.source.version
            if name not in repository:
                served = ", ".join(repository.names)
                raise UserError(
                    f"--canary {canary.source.spec or name!r} is for model {name!r}, which is "
                    f"not served (models: {served}): serve a first version of it too"
                )
            loaded = repository.endpoint(name).state.versions
            if version in loaded and canary.source.registered is None:
                # A file has no version of its own ("1"): number it after those served.
                version = str(1 + max((int(v) for v in loaded if v.isdigit()), default=0))
                canary = Canary(dataclasses.replace(canary.source, version=version), canary.percent)
            if version in loaded:
                raise UserError(
                    f"--canary {canary.source.spec or name!r}: model {name!r} already serves "
                    f"version {version}; a canary must be another version"
                )
            repository.add_model(canary.source, default=False)
            repository.endpoint(name).set_policy(CanaryPolicy(version, canary.percent))
    except BaseException:
        repository.close()
        raise
    return repository


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to `host:port` (inherited by worker processes).

    Raises:
        UserError: The address is in use, not this machine's, or not allowed.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it a response's header and body writes wait 40 ms on the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        hint = " (another server is there: choose another --port)" if exc.errno == 98 else ""
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from exc
    except (OverflowError, TypeError) as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc}") from exc
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def _stop_signals_as_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as SIGINT does, while the block runs (main thread
    only), so either ends the server the same way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _config_file(config: ServerConfig) -> Iterator[Path]:
    """The config as JSON in a directory only this user can read (it holds the token)."""
    folder = Path(tempfile.mkdtemp(prefix="headwater-serve-"))
    try:
        path = folder / "config.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            json.dump(config.to_json(), stream)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)
