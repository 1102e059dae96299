"""The admin API: a canary's share of traffic, promote, rollback and reload, at run time.

    GET  /admin/models/{name}/traffic   {"name", "default", "canary", "versions", "traffic"}
    POST /admin/models/{name}/traffic   {"canary": {"version": "2", "percent": 25}}
                                        {"action": "promote"} | {"action": "rollback"}
    POST /admin/models/{name}/reload    {} or {"version": "2"}: a fresh copy, swapped in
    POST /admin/models/{name}/load      {"model": "churn:4"}: load a model (a MODEL spec, as
                                        `headwater serve` takes) as the default version
    POST /admin/models/{name}/unload    {"version": "3"}: stop serving a version

A load answers `{"loaded": VERSION, ...}`: the registry version, or for a file the next
number after the versions served. The new version takes new requests as soon as it has
loaded; an unloaded one finishes the requests it has. `deploy_model` updates a running
server with these two.

Each POST answers the traffic state after it. The routes sit behind the server's token like
every other (loopback only when there is none). Their changes live in the process that
answers them: a server with several worker processes refuses them (409), since a change
would reach one worker of N; run `--workers 1` to steer a rollout.
"""

from __future__ import annotations

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


class AdminDisabledError(ProtocolError):
    """The admin API cannot change this server (several worker processes)."""

    status = 409


def admin_router(*, writable: bool = True) -> APIRouter:
    """The admin routes.

    Args:
        writable: False answers every change with 409 (a multi-process server, where a
            change would reach only the worker that took the request).
    """
    router = APIRouter()

    def check_writable() -> None:
        if not writable:
            raise AdminDisabledError(
                "this server runs several worker processes, each with its own models: an "
                "admin change would reach only one of them. Serve with --workers 1 to "
                "change traffic or reload at run time"
            )

    @router.get("/admin/models/{name}/traffic")
    async def get_traffic(request: Request, name: str) -> Response:
        """The endpoint's versions and how its traffic is split."""
        context = ServingContext.of(request)
        endpoint = context.repository.endpoint(name)
        context.mark(request, name, None, PROTOCOL, "traffic")
        return json_response(traffic.describe(endpoint))

    @router.post("/admin/models/{name}/traffic")
    async def set_traffic(request: Request, name: str) -> Response:
        """Set a canary's percentage, promote it, or roll it back."""
        context = ServingContext.of(request)
        endpoint = context.repository.endpoint(name)
        context.mark(request, name, None, PROTOCOL, "traffic")
        body, _ = await read_json(request, context.max_body_bytes)
        check_writable()
        action = body.get("action")
        canary = body.get("canary")
        if (action is None) == (canary is None) or set(body) - {"action", "canary"}:
            raise InvalidInputError(
                'send one of {"canary": {"version": "V", "percent": P}}, '
                f'{{"action": "promote"}} or {{"action": "rollback"}}; got {_keys(body)}'
            )
        if action is not None:
            if action == "promote":
                traffic.promote(endpoint)
            elif action == "rollback":
                traffic.rollback(endpoint)
            else:
                raise InvalidInputError(
                    f"unknown action {action!r} (actions: {', '.join(ACTIONS)})"
                )
        else:
            version, percent = _canary(canary)
            traffic.set_canary(endpoint, version, percent)
        return json_response(traffic.describe(endpoint))

    @router.post("/admin/models/{name}/reload")
    async def reload(request: Request, name: str) -> Response:
        """Load a fresh copy of a version (default: the default) and swap it in; requests in
        flight finish on the old copy."""
        context = ServingContext.of(request)
        endpoint = context.repository.endpoint(name)
        context.mark(request, name, None, PROTOCOL, "reload")
        body = await _optional_json(request, context.max_body_bytes)
        check_writable()
        version = body.get("version")
        if version is not None and not isinstance(version, str | int):
            raise InvalidInputError(f'"version" must be a string, got {version!r}')
        label = None if version is None else str(version)
        loaded = await anyio.to_thread.run_sync(lambda: endpoint.reload(label))
        return json_response({"reloaded": loaded.version, **traffic.describe(endpoint)})

    @router.post("/admin/models/{name}/load")
    async def load(request: Request, name: str) -> Response:
        """Load a model (a MODEL spec) as a new default version of the endpoint `name`."""
        context = ServingContext.of(request)
        context.mark(request, name, None, PROTOCOL, "load")
        body, _ = await read_json(request, context.max_body_bytes)
        check_writable()
        spec = body.get("model")
        if not isinstance(spec, str) or not spec.strip() or set(body) - {"model"}:
            raise InvalidInputError(
                f'send {{"model": "MODEL"}} (a registry name, URI or path); got {_keys(body)}'
            )
        repository = context.repository
        loaded = await anyio.to_thread.run_sync(lambda: _load(repository, name, spec))
        return json_response({"loaded": loaded, **traffic.describe(repository.endpoint(name))})

    @router.post("/admin/models/{name}/unload")
    async def unload(request: Request, name: str) -> Response:
        """Stop serving one version of the endpoint `name` (it finishes its requests)."""
        context = ServingContext.of(request)
        endpoint = context.repository.endpoint(name)
        context.mark(request, name, None, PROTOCOL, "unload")
        body, _ = await read_json(request, context.max_body_bytes)
        check_writable()
        version = body.get("version")
        if (
            not isinstance(version, str | int)
            or isinstance(version, bool)
            or set(body) - {"version"}
        ):
            raise InvalidInputError(f'send {{"version": "V"}}; got {_keys(body)}')
        label = str(version)
        if list(endpoint.state.versions) == [label]:
            raise InvalidInputError(
                f"version {label} is the only version of {name!r}: load another first"
            )
        endpoint.unload(label)
        return json_response({"unloaded": label, **traffic.describe(endpoint)})

    return router


def _load(repository: ModelRepository, name: str, spec: str) -> str:
    """Resolve `spec` as endpoint `name`'s model and load it as the default version."""
    import dataclasses

    from headwater.errors import UserError
    from headwater.serving.resolve import resolve

    try:
        source = resolve(f"{name}={spec}")
    except UserError as exc:
        raise InvalidInputError(str(exc)) from exc
    loaded = repository.endpoint(name).state.versions if name in repository else {}
    if source.registered is None:  # a file has no version of its own: number it after
        number = 1 + max((int(v) for v in loaded if v.isdigit()), default=0)
        source = dataclasses.replace(source, version=str(number))
    try:
        return repository.add_model(source).version
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


__all__ = ["AdminDisabledError", "admin_router"]
