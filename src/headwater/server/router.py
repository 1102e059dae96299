"""KFP's v2beta1 REST API (`/apis/v2beta1/...`): the route table, and the one place that turns
answers and errors into HTTP.

Hand-written routes over Headwater's records (ADR 61): one table of (method, path pattern,
handler); a request no row matches answers 501 naming the endpoint. Handlers run on a worker
thread (the store is synchronous), only parse, call and convert (`server.kfp`), and raise
Headwater's errors: `NotFoundError` is a 404, `ConflictError` a 409, any other `UserError` a
400, each with KFP's error body; nothing answers a traceback. Every request has its principal
(`Call.who`, found by `identify.Identify`): a change (any method but GET) needs a role that
may change (`Principal.check_role`, here for every route), and each handler allows what it
reads or changes by its namespace (`Call.allow`), which is also noted for the audit log. The
list endpoints are one handler (`register_list`), given what each lists as a `Listing`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.access import ANONYMOUS, Principal
from headwater.errors import ConflictError, NotFoundError, PermissionDeniedError, UserError
from headwater.metadata.base import MetadataStore, Predicate
from headwater.server.kfp.wire import ListSpec, list_page, next_token, query_value, status_body
from headwater.spec.documents import read_json

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from headwater.server.operations import RunOperations
    from headwater.server.queue import QueueSettings, RunQueue
    from headwater.ui.identity import Gate

__all__ = ["PREFIX", "UPLOADS", "ApiError", "Call", "Listing", "ServerState", "handle", "route"]

PREFIX = "/apis/v2beta1"
_log = logging.getLogger(__name__)
#: The routes that take a multipart file upload (every other change takes JSON).
UPLOADS = (f"{PREFIX}/pipelines/upload", f"{PREFIX}/pipelines/upload_version")


@dataclass
class ServerState:
    """What the routes work on: the store, the run operations, the queue and its settings, and
    the server's principals."""

    store: MetadataStore
    runs: RunOperations
    queue: RunQueue
    settings: QueueSettings
    gate: Gate | None = None


@dataclass
class Call:
    """One request, read: path parameters, query, and the body (JSON, or raw bytes)."""

    params: dict[str, str]
    query: Mapping[str, str]
    body: Any
    raw: bytes = b""
    content_type: str = ""
    #: Who sent it.
    who: Principal = ANONYMOUS
    #: What the audit log records of it (`namespace`, `resource`).
    noted: dict[str, Any] = field(default_factory=dict)

    def q(self, name: str) -> str:
        """A query value, "" when absent or empty."""
        return query_value(self.query, name)

    def allow(self, namespace: str, what: str, *, write: bool = False) -> None:
        """Allow reading (or with `write` changing) `what`, in `namespace`; noted for the audit.

        Raises:
            PermissionDeniedError: The principal may not.
        """
        self.noted.setdefault("namespace", namespace)
        self.who.check(namespace, write=write, what=what)


class ApiError(Exception):
    """An answer other than 2xx that no Headwater error stands for (an unknown route)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


Handler = Callable[[ServerState, Call], Any]
_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register a handler for `method` on `pattern` (`{name}` matches one path segment)."""
    regex = re.compile(
        "^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/:]+)", pattern.replace(":", r"\:")) + "$"
    )

    def register(fn: Handler) -> Handler:
        _ROUTES.append((method, regex, fn))
        return fn

    return register


def _status(exc: Exception) -> int:
    if isinstance(exc, ApiError):
        return exc.status
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, PermissionDeniedError):
        return 403
    return 400


async def handle(request: Request) -> Response:
    """Answer one `/apis/v2beta1/...` request (mounted by `server.app`)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    state: ServerState = request.app.state.kfp
    path = request.url.path[len(PREFIX) :] or "/"
    method = request.method
    matches = [
        (m, fn) for want, regex, fn in _ROUTES if want == method and (m := regex.match(path))
    ]
    if not matches:
        message = (
            f"{method} {PREFIX}{path} is not supported by headwater server "
            "(see docs/server.md for the endpoints it implements)"
        )
        return JSONResponse(status_body(501, message), status_code=501)
    match, fn = matches[0]
    raw = await request.body()
    kind = request.headers.get("content-type", "")
    body: Any = None
    try:
        if raw.strip() and request.url.path not in UPLOADS:
            body = read_json(raw, what="the request body")
        noted = getattr(request.state, "audit", None)
        call = Call(
            dict(match.groupdict()),
            request.query_params,
            body,
            raw,
            kind,
            who=getattr(request.state, "principal", ANONYMOUS),
            noted=noted if noted is not None else {},
        )
        ids = [v for k, v in call.params.items() if k.endswith("_id")]
        if ids:
            call.noted.setdefault("resource", ids[-1])
        if method != "GET":
            call.who.check_role(f"{method} {PREFIX}{path}")
        answer = await run_in_threadpool(fn, state, call)
        _note_created(call.noted, answer)
    except (ApiError, UserError) as exc:
        status = _status(exc)
        return JSONResponse(status_body(status, str(exc)), status_code=status)
    except Exception:  # a bug, or the store failing: said in the log, never to the client
        _log.exception("%s %s failed", method, request.url.path)
        message = f"{method} {PREFIX}{path} failed inside the server (its log says why)"
        return JSONResponse(status_body(500, message), status_code=500)
    return JSONResponse(answer if answer is not None else {})


#: The keys of an answer that name the resource a request made, most specific first.
_MADE = ("run_id", "recurring_run_id", "pipeline_version_id", "experiment_id", "pipeline_id")


def _note_created(noted: dict[str, Any], answer: Any) -> None:
    """Note the id of what a request made (its answer names it) for the audit log."""
    if isinstance(answer, dict) and not noted.get("resource"):
        found = next((answer[k] for k in _MADE if answer.get(k)), None)
        if found is not None:
            noted["resource"] = str(found)
        if "namespace" not in noted and isinstance(answer.get("namespace"), str):
            noted["namespace"] = answer["namespace"]


@dataclass(frozen=True)
class Listing:
    """One list endpoint: what it lists and how (served by `register_list`).

    Attributes:
        path: The route.
        kind: The store's record kind (`MetadataStore.page`).
        key: The answer's key for the records.
        spec: What its query may name.
        scope: Predicates the path and query add (the namespace, the parent).
        convert: The page's records as KFP's resources.
    """

    path: str
    kind: str
    key: str
    spec: ListSpec
    scope: Callable[[ServerState, Call], tuple[Predicate, ...]]
    convert: Callable[[ServerState, list[Any]], list[dict[str, Any]]]


def register_list(listing: Listing) -> None:
    """Serve `listing` at GET `listing.path`."""

    def answer(state: ServerState, call: Call) -> dict[str, Any]:
        page = list_page(call.query, listing.spec, *listing.scope(state, call))
        records, total = state.store.page(listing.kind, page)
        doc: dict[str, Any] = {"total_size": total, "next_page_token": next_token(page, total)}
        if records:
            doc[listing.key] = listing.convert(state, records)
        return doc

    route("GET", listing.path)(answer)


def scoped(*fields: str) -> Callable[[ServerState, Call], tuple[Predicate, ...]]:
    """A `Listing.scope` that filters on each of `fields` the query gives (`experiment_id`):
    equal, when given; and on the namespaces the principal may list (`namespace`: the one the
    query names, checked, else all it holds). An `experiment_id` must be readable."""

    def scope(state: ServerState, call: Call) -> tuple[Predicate, ...]:
        where = [
            Predicate(f, "EQUALS", call.q(f)) for f in fields if f != "namespace" and call.q(f)
        ]
        if "experiment_id" in fields and call.q("experiment_id"):
            found = state.store.get_experiment(call.q("experiment_id"))
            if found is not None:
                call.allow(found.namespace, f"experiment {found.experiment_id}")
        if "namespace" in fields:
            where.extend(namespace_scope(call))
        return tuple(where)

    return scope


def namespace_scope(call: Call, *, shared: bool = False) -> tuple[Predicate, ...]:
    """The predicate that keeps a list to the namespaces the principal may list (none for an
    admin who names none); with `shared`, the shared (namespace-less) records too."""
    requested = call.q("namespace")
    held = call.who.list_namespaces(requested)
    if held is None:
        return ()
    if shared and not requested:
        held = ["", *held]
    return (Predicate("namespace", "IN", held),)
