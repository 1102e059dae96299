"""The admin API: a canary's share of traffic, promote, rollback, load, unload and reload, at
run time, in every worker process of the server.

    GET  /admin/models/{name}/traffic   {"name", "default", "canary", "versions", "traffic"}
    POST /admin/models/{name}/traffic   {"canary": {"version": "2", "percent": 25}}
                                        {"action": "promote"} | {"action": "rollback"}
    POST /admin/models/{name}/reload    {} or {"version": "2"}: a fresh copy, swapped in
    POST /admin/models/{name}/load      {"model": "churn:4"}: load a model (a MODEL spec, as
                                        `headwater serve` takes) as the default version
    POST /admin/models/{name}/unload    {"version": "3"}: stop serving a version

A load answers `{"loaded": VERSION, ...}`: the registry version, or for a file the next
number after every version the endpoint has served (a label is never given to another model,
even after an unload). The new version takes new requests as soon as it has loaded; an
unloaded one finishes the requests it has. `deploy_model` updates a running server with
these two. Each POST answers the traffic state after it. The routes sit behind
the server's token like every other (loopback only when there is none).

With several worker processes (`--workers N`) each holds its own models. A change is applied
by the worker that takes the request, which answers with its state, and written to the
server's `ChangeLog`, a file every worker tails: the others apply it within a poll
(`ChangeLog.POLL_S`), a load once they have loaded the model, in the order the changes were
made; a worker the server restarts replays the log before it takes a request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from headwater.serving import traffic
from headwater.serving.context import ServingContext
from headwater.serving.errors import InvalidInputError, ProtocolError
from headwater.serving.repository import ModelRepository
from headwater.serving.wire import json_response, read_json

PROTOCOL = "admin"
ACTIONS = ("promote", "rollback")
#: The changes the admin API makes, by the last segment of their route.
CHANGES = ("traffic", "reload", "load", "unload")
_log = logging.getLogger("headwater.serving")


class AdminDisabledError(ProtocolError):
    """The admin API cannot change this server."""

    status = 409


def admin_router(*, writable: bool = True, changes: ChangeLog | None = None) -> APIRouter:
    """The admin routes.

    Args:
        writable: False answers every change with 409.
        changes: Where this worker writes the changes it makes, for the server's other
            workers (None: a server of one process).
    """
    router = APIRouter()

    @router.get("/admin/models/{name}/traffic")
    async def get_traffic(request: Request, name: str) -> Response:
        """The endpoint's versions and how its traffic is split."""
        context = ServingContext.of(request)
        endpoint = context.repository.endpoint(name)
        context.mark(request, name, None, PROTOCOL, "traffic")
        return json_response(traffic.describe(endpoint))

    async def change(request: Request, name: str, kind: str) -> Response:
        context = ServingContext.of(request)
        if kind != "load":
            context.repository.endpoint(name)  # 404 before anything else
        context.mark(request, name, None, PROTOCOL, kind)
        body = await _optional_json(request, context.max_body_bytes)
        if not writable:
            raise AdminDisabledError("this server's admin API is read-only")
        repository = context.repository

        def make() -> dict[str, Any]:
            if changes is None:
                return apply_change(repository, name, kind, body)[0]
            with changes.turn():  # after every change the other workers made before
                answer, applied = apply_change(repository, name, kind, body)
                changes.publish({"name": name, "kind": kind, "body": applied})
                return answer

        answer = await anyio.to_thread.run_sync(make)
        return json_response(answer)

    @router.post("/admin/models/{name}/traffic")
    async def set_traffic(request: Request, name: str) -> Response:
        """Set a canary's percentage, promote it, or roll it back."""
        return await change(request, name, "traffic")

    @router.post("/admin/models/{name}/reload")
    async def reload(request: Request, name: str) -> Response:
        """Load a fresh copy of a version (default: the default) and swap it in; requests in
        flight finish on the old copy."""
        return await change(request, name, "reload")

    @router.post("/admin/models/{name}/load")
    async def load(request: Request, name: str) -> Response:
        """Load a model (a MODEL spec) as a new default version of the endpoint `name`."""
        return await change(request, name, "load")

    @router.post("/admin/models/{name}/unload")
    async def unload(request: Request, name: str) -> Response:
        """Stop serving one version of the endpoint `name` (it finishes its requests)."""
        return await change(request, name, "unload")

    return router


def apply_change(
    repository: ModelRepository, name: str, kind: str, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check and make one admin change to endpoint `name` (blocking while a model loads).

    Returns:
        The answer, and the change as the other workers must make it to end in the same
        state (a load names the version it got).

    Raises:
        InvalidInputError: A body the change does not take, or a change that cannot be made.
        ModelNotFoundError: No endpoint `name` (but for a load, which creates it).
    """
    if kind == "traffic":
        return _traffic(repository, name, body), body
    if kind == "reload":
        version = body.get("version")
        if set(body) - {"version"}:
            raise InvalidInputError(f'send {{}} or {{"version": "V"}}; got {_keys(body)}')
        if version is not None and not isinstance(version, str | int):
            raise InvalidInputError(f'"version" must be a string, got {version!r}')
        endpoint = repository.endpoint(name)
        loaded = endpoint.reload(None if version is None else str(version))
        return {"reloaded": loaded.version, **traffic.describe(endpoint)}, body
    if kind == "load":
        spec, version = body.get("model"), body.get("version")
        if (
            not isinstance(spec, str)
            or not spec.strip()
            or set(body) - {"model", "version"}
            or (version is not None and not isinstance(version, str))
        ):
            raise InvalidInputError(
                f'send {{"model": "MODEL"}} (a registry name, URI or path); got {_keys(body)}'
            )
        label = _load(repository, name, spec, version)
        answer = {"loaded": label, **traffic.describe(repository.endpoint(name))}
        return answer, {"model": spec, "version": label}
    if kind == "unload":
        version = body.get("version")
        if (
            not isinstance(version, str | int)
            or isinstance(version, bool)
            or set(body) - {"version"}
        ):
            raise InvalidInputError(f'send {{"version": "V"}}; got {_keys(body)}')
        endpoint = repository.endpoint(name)
        label = str(version)
        if list(endpoint.state.versions) == [label]:
            raise InvalidInputError(
                f"version {label} is the only version of {name!r}: load another first"
            )
        endpoint.unload(label)
        return {"unloaded": label, **traffic.describe(endpoint)}, body
    raise InvalidInputError(f"unknown change {kind!r} (changes: {', '.join(CHANGES)})")


class ChangeLog:
    """The admin changes of a server's worker processes: a file of JSON lines each appends
    to and tails, applying the changes the others made, in order.

    Args:
        path: The file (in the server's private folder).
        apply: Makes one change here (`{"name", "kind", "body"}`).
        writer: Who this worker is in the file (default its process id): its own lines are
            skipped.
    """

    #: Seconds between looks at the file.
    POLL_S = 0.1

    def __init__(
        self,
        path: str | os.PathLike[str],
        apply: Callable[[dict[str, Any]], None],
        *,
        writer: str | None = None,
    ) -> None:
        self.path = Path(path)
        self._apply = apply
        self._offset = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer = writer or str(os.getpid())
        self._lock = threading.RLock()

    def publish(self, change: dict[str, Any]) -> None:
        """Append `change`, made here, for the other workers."""
        import fcntl

        line = json.dumps({**change, "writer": self._writer}, separators=(",", ":")) + "\n"
        with self.path.open("a") as stream:
            fcntl.flock(stream, fcntl.LOCK_EX)
            try:
                stream.write(line)
            finally:
                fcntl.flock(stream, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """This worker's turn to make a change: what the others wrote before is made first,
        no other worker makes one until the block ends, and none of theirs is made here
        meanwhile (write yours with `publish` inside the block)."""
        import fcntl

        # One change at a time in the whole server (the file lock), so every worker sees the
        # changes in one order; and none of the others' made here meanwhile (the thread lock).
        with self._lock, self.path.with_name(self.path.name + ".lock").open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            try:
                self.catch_up()
                yield
            finally:
                fcntl.flock(held, fcntl.LOCK_UN)

    def catch_up(self) -> int:
        """Make the changes written since the last look (but this worker's own); how many."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        try:
            with self.path.open("rb") as stream:
                stream.seek(self._offset)
                data = stream.read()
        except FileNotFoundError:
            return 0
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self._offset += end
        made = 0
        for line in data[:end].splitlines():
            change = json.loads(line)
            if change.pop("writer", None) == self._writer:
                continue
            try:
                self._apply(change)
            except Exception as exc:  # one worker's failure must not stop the others' log
                _log.warning("admin change %s not made in worker %s: %s", change, self._writer, exc)
            made += 1
        return made

    def start(self) -> None:
        """Replay what was written before this worker started, then follow the file."""
        self.catch_up()
        self._thread = threading.Thread(
            target=self._follow, name="headwater-admin-log", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop following the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _follow(self) -> None:
        while not self._stop.wait(self.POLL_S):
            with contextlib.suppress(Exception):
                self.catch_up()


def change_log(
    path: str | os.PathLike[str], repository: ModelRepository, *, writer: str | None = None
) -> ChangeLog:
    """A `ChangeLog` at `path` that makes the other workers' changes to `repository`."""

    def apply(change: dict[str, Any]) -> None:
        apply_change(repository, change["name"], change["kind"], change.get("body", {}))

    return ChangeLog(path, apply, writer=writer)


def _traffic(repository: ModelRepository, name: str, body: dict[str, Any]) -> dict[str, Any]:
    endpoint = repository.endpoint(name)
    action = body.get("action")
    canary = body.get("canary")
    if (action is None) == (canary is None) or set(body) - {"action", "canary"}:
        raise InvalidInputError(
            'send one of {"canary": {"version": "V", "percent": P}}, '
            f'{{"action": "promote"}} or {{"action": "rollback"}}; got {_keys(body)}'
        )
    if action == "promote":
        traffic.promote(endpoint)
    elif action == "rollback":
        traffic.rollback(endpoint)
    elif action is not None:
        raise InvalidInputError(f"unknown action {action!r} (actions: {', '.join(ACTIONS)})")
    else:
        version, percent = _canary(canary)
        traffic.set_canary(endpoint, version, percent)
    return traffic.describe(endpoint)


def _load(repository: ModelRepository, name: str, spec: str, version: str | None) -> str:
    """Resolve `spec` as endpoint `name`'s model and load it as the default version
    (`version`, or the registry's, or for a file the next number after those served)."""
    from headwater.errors import UserError
    from headwater.serving.resolve import resolve

    try:
        source = resolve(f"{name}={spec}")
    except UserError as exc:
        raise InvalidInputError(str(exc)) from exc
    if version is not None:
        source = dataclasses.replace(source, version=version)
    try:
        # A file has no version of its own: it is numbered after every version served yet.
        numbered = version is None and source.registered is None
        return repository.add_model(source, numbered=numbered).version
    except UserError as exc:
        raise InvalidInputError(str(exc)) from exc


def _canary(canary: Any) -> tuple[str, float]:
    if not isinstance(canary, dict) or set(canary) != {"version", "percent"}:
        raise InvalidInputError(
            f'"canary" must be {{"version": "V", "percent": P}}, got {canary!r}'
        )
    version, percent = canary["version"], canary["percent"]
    if not isinstance(version, str | int) or isinstance(version, bool):
        raise InvalidInputError(f'"canary.version" must be a string, got {version!r}')
    if isinstance(percent, bool) or not isinstance(percent, int | float):
        raise InvalidInputError(f'"canary.percent" must be a number, got {percent!r}')
    return str(version), float(percent)


async def _optional_json(request: Request, limit: int) -> dict[str, Any]:
    if request.headers.get("content-length", "0") == "0":
        return {}
    body, _ = await read_json(request, limit)
    return body


def _keys(body: dict[str, Any]) -> str:
    return "{" + ", ".join(repr(k) for k in body) + "}" if body else "{}"


__all__ = ["AdminDisabledError", "ChangeLog", "admin_router", "apply_change", "change_log"]
