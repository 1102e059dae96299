"""Who may read and change what through the web UI (`headwater.access`'s rules, as KFP's routes
apply them in `server`).

`guard`, a dependency of every page and `/api/v1` route, allows what the path and query name:
a run (its tasks, logs, graph, metrics, trials), an experiment, a pipeline, a recurring run, an
artifact (readable where a run that made or read it is), the runs compared. A request that may
change something needs a role that may change. Lists show the namespaces the principal may
list (`list_namespaces`). On a server without principals nothing is asked of the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request  # at run time: FastAPI reads `guard`'s annotation

from headwater.access import Principal
from headwater.errors import PermissionDeniedError
from headwater.ui.app_state import principal_of

if TYPE_CHECKING:
    from headwater.metadata.base import MetadataStore

__all__ = ["allow_start", "guard", "list_namespaces", "note", "readable_runs"]

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def _store(request: Request) -> MetadataStore | None:
    gate = getattr(request.app.state, "gate", None)
    return None if gate is None else gate.store()


def note(request: Request, namespace: str | None, resource: str = "") -> None:
    """Note what a request acts on for the audit log (`ui.audit`), if it keeps one."""
    noted = getattr(request.state, "audit", None)
    if isinstance(noted, dict):
        if namespace is not None:
            noted.setdefault("namespace", namespace)
        if resource:
            noted.setdefault("resource", resource)


def guard(request: Request) -> None:
    """Allow the request what its path and query name, or raise.

    Raises:
        PermissionDeniedError: The principal may not (403).
    """
    who = principal_of(request)
    if not who.multi_user:
        return
    write = request.method not in _SAFE
    if write:
        who.check_role(f"{request.method} {request.url.path}")
    store = _store(request)
    if store is None:
        return
    params, query = request.path_params, request.query_params
    for run_id in [params.get("run_id"), *query.get("runs", "").split(",")]:
        if run_id and run_id.strip():
            _allow_run(request, who, store, run_id.strip(), write)
    if query.get("experiment"):
        _allow(request, who, store, "experiment_id", query["experiment"], False)
    if query.get("recurring_run"):
        _allow(request, who, store, "recurring_run_id", query["recurring_run"], False)
    for key in ("experiment_id", "recurring_run_id", "pipeline_id"):
        if params.get(key):
            _allow(request, who, store, key, str(params[key]), write)
    version = store.get_version(query["version"]) if query.get("version") else None
    if version is not None and version.pipeline_id:
        _allow(request, who, store, "pipeline_id", version.pipeline_id, False)
    ref = params.get("artifact_id") or params.get("ref")
    if ref is not None:
        _allow_artifact(request, who, store, str(ref))


def _allow_run(
    request: Request, who: Principal, store: MetadataStore, run_id: str, write: bool
) -> None:
    found = store.get_run(run_id)
    if found is not None:  # else the route answers 404
        note(request, found.namespace, found.run_id)
        who.check(found.namespace, write=write, what=f"run {found.run_id}")


def _allow(
    request: Request, who: Principal, store: MetadataStore, key: str, value: str, write: bool
) -> None:
    if key == "experiment_id":
        found: Any = store.get_experiment(value)
        what = f"experiment {value}"
    elif key == "recurring_run_id":
        found = store.get_recurring_run(value)
        what = f"recurring run {value}"
    else:
        found = store.get_pipeline(value)
        what = f"pipeline {value}"
        if found is not None and not found.namespace:
            return  # shared: every principal reads it (the UI changes no pipeline)
    if found is not None:
        note(request, found.namespace, value)
        who.check(found.namespace, write=write, what=what)


def _allow_artifact(request: Request, who: Principal, store: MetadataStore, ref: str) -> None:
    found = store.get_artifact(int(ref) if ref.isdigit() else ref)
    if found is None or found.id is None or who.is_admin:
        return
    held = store.artifact_namespaces(found.id)
    if not any(who.holds(ns) for ns in held):
        where = ", ".join(sorted(repr(ns) for ns in held)) or "none"
        raise PermissionDeniedError(
            f"Failed to access artifact {found.id}: the runs that made or read it are in "
            f"{where}, which {who.describe()} does not hold"
        )


def allow_start(
    request: Request, experiment_id: str, namespace: str, version_id: str | None
) -> str:
    """Allow starting a run in `experiment_id` (else the Default of `namespace`, else of the
    principal's only namespace) of the version `version_id`; the namespace to file it in.

    Raises:
        PermissionDeniedError: The principal may not start runs there, or read the version.
        InvalidArgumentError: No namespace is named and the principal holds several.
    """
    who = principal_of(request)
    if not who.multi_user:
        return namespace
    store = _store(request)
    if store is not None and version_id:
        version = store.get_version(version_id)
        if version is not None and version.pipeline_id:
            _allow(request, who, store, "pipeline_id", version.pipeline_id, False)
    if experiment_id:
        if store is not None:
            _allow(request, who, store, "experiment_id", experiment_id, True)
        return namespace
    namespace = who.default_namespace(namespace, "A run")
    note(request, namespace, "")
    who.check(namespace, write=True, what=f"runs of namespace {namespace!r}")
    return namespace


def list_namespaces(
    request: Request, requested: str = "", *, shared: bool = False
) -> list[str] | None:
    """The namespaces a list shows (None: all): `requested` (allowed), else every one the
    principal holds; with `shared`, "" (the shared pipelines) too."""
    who = principal_of(request)
    found = who.list_namespaces(requested)
    if found is not None and shared and not requested:
        found = ["", *found]
    return found


def readable_runs(request: Request) -> Callable[[str], bool]:
    """A test of run ids: True if the principal may read the run (each run read once)."""
    who = principal_of(request)
    store = _store(request)
    if not who.multi_user or who.is_admin or store is None:
        return lambda run_id: True
    seen: dict[str, bool] = {}

    def readable(run_id: str) -> bool:
        if run_id not in seen:
            found = store.get_run(run_id)
            seen[run_id] = found is not None and who.holds(found.namespace)
        return seen[run_id]

    return readable
