"""KFP's v2beta1 REST API (`/apis/v2beta1/...`), as `kfp.Client` calls it, over `KfpStore`.

Hand-written routes over plain dicts (ADR 61): one table of (method, path pattern, handler);
a request no row matches answers 501 naming the endpoint. Handlers run on a worker thread
(the store is synchronous) and raise `ApiError` for KFP's error body; a Headwater user error
is a 400, and nothing answers a traceback.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any

from headwater.errors import NotFoundError, UserError
from headwater.metadata.schema import (
    KFP_EXPERIMENTS,
    KFP_PIPELINE_VERSIONS,
    KFP_PIPELINES,
    KFP_RUNS,
)
from headwater.server.runs import check_submission, parse_spec, run_json
from headwater.server.store import ACTIVE, FINAL, KfpStore, Record
from headwater.server.wire import ApiError, list_query, rfc3339, status_body

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from headwater.server.queue import RunQueue

__all__ = ["PREFIX", "ServerState", "handle"]

PREFIX = "/apis/v2beta1"


@dataclass
class ServerState:
    """What the routes work on: the store, the queue, and the store's URL."""

    store: KfpStore
    queue: RunQueue
    metadata_url: str


@dataclass
class Call:
    """One request, read: path parameters, query, and the body (JSON, or raw bytes)."""

    params: dict[str, str]
    query: Mapping[str, str]
    body: Any
    raw: bytes = b""
    content_type: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


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
        return JSONResponse(
            status_body(
                501,
                f"{method} {PREFIX}{path} is not supported by headwater server "
                "(see docs/server.md for the endpoints it implements)",
            ),
            status_code=501,
        )
    match, fn = matches[0]
    raw = await request.body()
    kind = request.headers.get("content-type", "")
    body: Any = None
    media = kind.partition(";")[0].strip().lower()
    upload = path in ("/pipelines/upload", "/pipelines/upload_version")
    if (
        raw.strip()
        and media != "application/json"
        and not (upload and media.startswith("multipart/"))
    ):
        # The types a page of another site may send without asking first (ADR 19).
        return JSONResponse(
            status_body(415, f"{method} {PREFIX}{path} takes application/json (got {kind!r})"),
            status_code=415,
        )
    if raw.strip() and not upload:
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return JSONResponse(status_body(400, f"the body is not JSON: {exc}"), status_code=400)
    call = Call({k: v for k, v in match.groupdict().items()}, request.query_params, body, raw, kind)
    try:
        answer = await run_in_threadpool(fn, state, call)
    except ApiError as exc:
        return JSONResponse(status_body(exc.status, exc.message), status_code=exc.status)
    except NotFoundError as exc:
        return JSONResponse(status_body(404, str(exc)), status_code=404)
    except UserError as exc:
        return JSONResponse(status_body(400, str(exc)), status_code=400)
    return JSONResponse(answer if answer is not None else {})


# -- helpers --------------------------------------------------------------------------------


def _q(call: Call, name: str) -> str:
    return (call.query.get(name) or "").strip()


def _obj(call: Call) -> dict[str, Any]:
    if not isinstance(call.body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return call.body


def _text(doc: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = doc.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"{name} is required")
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string, got {value!r}")
    return value


def _page(rows: list[dict[str, Any]], key: str, total: int, token: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"total_size": total, "next_page_token": token}
    if rows:
        doc[key] = rows
    return doc


# -- healthz --------------------------------------------------------------------------------


@route("GET", "/healthz")
def healthz(state: ServerState, call: Call) -> Any:
    from importlib.metadata import version

    return {
        "multi_user": False,
        "pipeline_store": "database",
        "commit_sha": "",
        "tag_name": f"headwater {version('headwater')}",
    }


# -- experiments ----------------------------------------------------------------------------


def _experiment(row: Record) -> dict[str, Any]:
    return {
        "experiment_id": row["experiment_id"],
        "display_name": row["display_name"],
        "description": row["description"],
        "namespace": row["namespace"],
        "storage_state": row["storage_state"],
        "created_at": rfc3339(row["created_at"]),
    }


@route("POST", "/experiments")
def create_experiment(state: ServerState, call: Call) -> Any:
    doc = _obj(call)
    name, namespace = _text(doc, "display_name", required=True), _text(doc, "namespace")
    try:
        row = state.store.create_experiment(name, _text(doc, "description"), namespace)
    except ApiError as exc:
        # `kfp.Client` creates an experiment only after finding none by that name: clients
        # racing to create the same one (the first runs of a team) all get it, where upstream
        # answers all but one with 409.
        found = state.store.experiment_named(name, namespace) if exc.status == 409 else None
        if found is None:
            raise
        row = found
    return _experiment(row)


@route("GET", "/experiments/{experiment_id}")
def get_experiment(state: ServerState, call: Call) -> Any:
    return _experiment(state.store.experiment(call.params["experiment_id"]))


@route("GET", "/experiments")
def list_experiments(state: ServerState, call: Call) -> Any:
    query = list_query(
        call.query,
        id_key="experiment_id",
        sort_keys=("created_at", "display_name"),
        filter_keys=("display_name", "created_at", "storage_state", "namespace", "description"),
    )
    conds = []
    if _q(call, "namespace"):
        conds.append(KFP_EXPERIMENTS.c.namespace == _q(call, "namespace"))
    rows, total = state.store.page(KFP_EXPERIMENTS, query, *conds)
    return _page([_experiment(r) for r in rows], "experiments", total, query.next_token(total))


@route("POST", "/experiments/{experiment_id}:archive")
def archive_experiment(state: ServerState, call: Call) -> Any:
    state.store.set_experiment_storage(call.params["experiment_id"], "ARCHIVED")


@route("POST", "/experiments/{experiment_id}:unarchive")
def unarchive_experiment(state: ServerState, call: Call) -> Any:
    state.store.set_experiment_storage(call.params["experiment_id"], "AVAILABLE")


@route("DELETE", "/experiments/{experiment_id}")
def delete_experiment(state: ServerState, call: Call) -> Any:
    state.store.delete_experiment(call.params["experiment_id"])


# -- pipelines and versions -----------------------------------------------------------------


def _pipeline(row: Record) -> dict[str, Any]:
    return {
        "pipeline_id": row["pipeline_id"],
        "display_name": row["display_name"],
        "name": row["display_name"],
        "description": row["description"],
        "namespace": row["namespace"],
        "created_at": rfc3339(row["created_at"]),
    }


def _version(row: Record) -> dict[str, Any]:
    return {
        "pipeline_id": row["pipeline_id"],
        "pipeline_version_id": row["pipeline_version_id"],
        "display_name": row["display_name"],
        "name": row["display_name"],
        "description": row["description"],
        "created_at": rfc3339(row["created_at"]),
        "pipeline_spec": row["pipeline_spec"],
    }


def _checked_spec(doc: Any) -> dict[str, Any]:
    parse_spec(doc)
    return dict(doc)


def _uploaded_spec(call: Call) -> tuple[dict[str, Any], str]:
    """The spec in a multipart `uploadfile` (YAML or JSON; a platform spec as a second YAML
    document is kept beside it) and the file's name."""
    import yaml

    if not call.content_type.startswith("multipart/form-data"):
        raise ApiError(
            400, "upload a pipeline as multipart/form-data with the file in 'uploadfile'"
        )
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + call.content_type.encode("latin-1") + b"\r\n\r\n" + call.raw
    )
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") != "uploadfile":
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            raise ApiError(400, "the 'uploadfile' part holds no file")
        name = part.get_filename() or "pipeline.yaml"
        if name.endswith((".zip", ".tar.gz", ".tgz")):
            raise ApiError(400, f"{name}: upload the compiled .yaml or .json, not an archive")
        try:
            docs = [d for d in yaml.safe_load_all(data) if d is not None]
        except yaml.YAMLError as exc:
            raise ApiError(400, f"{name} is not YAML or JSON: {exc}") from exc
        if not docs or not isinstance(docs[0], dict):
            raise ApiError(400, f"{name} holds no pipeline spec")
        spec: dict[str, Any] = docs[0]
        if len(docs) > 1 and isinstance(docs[1], dict):
            spec = {"pipeline_spec": docs[0], "platform_spec": docs[1]}
        return _checked_spec(spec), name
    raise ApiError(400, "the upload has no 'uploadfile' part: send the pipeline file in it")


def _spec_name(spec: Mapping[str, Any], fallback: str) -> str:
    inner = spec.get("pipeline_spec", spec)
    info = inner.get("pipelineInfo") if isinstance(inner, Mapping) else None
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) and name else fallback


@route("POST", "/pipelines/upload")
def upload_pipeline(state: ServerState, call: Call) -> Any:
    spec, filename = _uploaded_spec(call)
    name = _q(call, "display_name") or _q(call, "name") or _spec_name(spec, filename)
    store = state.store
    row = store.create_pipeline(name, _q(call, "description"), _q(call, "namespace"))
    store.create_version(row["pipeline_id"], name, _q(call, "description"), spec)
    return _pipeline(row)


@route("POST", "/pipelines/upload_version")
def upload_version(state: ServerState, call: Call) -> Any:
    spec, filename = _uploaded_spec(call)
    pipeline_id = _q(call, "pipelineid")
    if not pipeline_id:
        raise ApiError(400, "pipelineid is required: the pipeline to add a version to")
    name = _q(call, "display_name") or _q(call, "name") or filename
    return _version(state.store.create_version(pipeline_id, name, _q(call, "description"), spec))


@route("POST", "/pipelines")
def create_pipeline(state: ServerState, call: Call) -> Any:
    doc = _obj(call)
    name = _text(doc, "display_name") or _text(doc, "name", required=True)
    return _pipeline(
        state.store.create_pipeline(name, _text(doc, "description"), _text(doc, "namespace"))
    )


@route("POST", "/pipelines/create")
def create_pipeline_and_version(state: ServerState, call: Call) -> Any:
    doc = _obj(call)
    pipeline, version = doc.get("pipeline"), doc.get("pipeline_version")
    if not isinstance(pipeline, dict) or not isinstance(version, dict):
        raise ApiError(400, "send {pipeline: {...}, pipeline_version: {pipeline_spec: ...}}")
    spec = _version_spec(version)
    name = _text(pipeline, "display_name") or _text(pipeline, "name", required=True)
    row = state.store.create_pipeline(
        name, _text(pipeline, "description"), _text(pipeline, "namespace")
    )
    vname = _text(version, "display_name") or _text(version, "name") or name
    state.store.create_version(row["pipeline_id"], vname, _text(version, "description"), spec)
    return _pipeline(row)


def _version_spec(version: Mapping[str, Any]) -> dict[str, Any]:
    if version.get("pipeline_spec") is None:
        if version.get("package_url"):
            raise ApiError(
                400,
                "pipeline_version.package_url is not supported by headwater server: send the "
                "spec itself in pipeline_spec, or upload the file",
            )
        raise ApiError(400, "pipeline_version.pipeline_spec is required")
    return _checked_spec(version["pipeline_spec"])


@route("GET", "/pipelines/names/{name}")
def get_pipeline_by_name(state: ServerState, call: Call) -> Any:
    return _pipeline(state.store.pipeline_named(call.params["name"], _q(call, "namespace")))


@route("GET", "/pipelines/{pipeline_id}")
def get_pipeline(state: ServerState, call: Call) -> Any:
    return _pipeline(state.store.pipeline(call.params["pipeline_id"]))


@route("GET", "/pipelines")
def list_pipelines(state: ServerState, call: Call) -> Any:
    query = list_query(
        call.query,
        id_key="pipeline_id",
        sort_keys=("created_at", "display_name"),
        filter_keys=("display_name", "created_at", "namespace", "description"),
    )
    conds = []
    if _q(call, "namespace"):
        conds.append(KFP_PIPELINES.c.namespace == _q(call, "namespace"))
    rows, total = state.store.page(KFP_PIPELINES, query, *conds)
    return _page([_pipeline(r) for r in rows], "pipelines", total, query.next_token(total))


@route("DELETE", "/pipelines/{pipeline_id}")
def delete_pipeline(state: ServerState, call: Call) -> Any:
    cascade = _q(call, "cascade").lower() == "true"
    state.store.delete_pipeline(call.params["pipeline_id"], cascade=cascade)


@route("POST", "/pipelines/{pipeline_id}/versions")
def create_version(state: ServerState, call: Call) -> Any:
    doc = _obj(call)
    spec = _version_spec(doc)
    name = _text(doc, "display_name") or _text(doc, "name", required=True)
    return _version(
        state.store.create_version(
            call.params["pipeline_id"], name, _text(doc, "description"), spec
        )
    )


@route("GET", "/pipelines/{pipeline_id}/versions/{version_id}")
def get_version(state: ServerState, call: Call) -> Any:
    return _version(state.store.version(call.params["pipeline_id"], call.params["version_id"]))


@route("GET", "/pipelines/{pipeline_id}/versions")
def list_versions(state: ServerState, call: Call) -> Any:
    pipeline_id = call.params["pipeline_id"]
    state.store.pipeline(pipeline_id)
    query = list_query(
        call.query,
        id_key="pipeline_version_id",
        sort_keys=("created_at", "display_name"),
        filter_keys=("display_name", "created_at", "description"),
    )
    rows, total = state.store.page(
        KFP_PIPELINE_VERSIONS, query, KFP_PIPELINE_VERSIONS.c.pipeline_id == pipeline_id
    )
    return _page([_version(r) for r in rows], "pipeline_versions", total, query.next_token(total))


@route("DELETE", "/pipelines/{pipeline_id}/versions/{version_id}")
def delete_version(state: ServerState, call: Call) -> Any:
    state.store.delete_version(call.params["pipeline_id"], call.params["version_id"])


# -- runs -----------------------------------------------------------------------------------


def _submission(store: KfpStore, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The checked columns a run or recurring run takes from its request: the pipeline (an
    inline spec or a version), the runtime config, the experiment and its namespace."""
    spec, ref = doc.get("pipeline_spec"), doc.get("pipeline_version_reference")
    if (spec is None) == (ref is None):
        raise ApiError(400, "send exactly one of pipeline_spec and pipeline_version_reference")
    pipeline_id = version_id = None
    if spec is not None:
        ir = parse_spec(spec)
    else:
        if not isinstance(ref, dict) or not _text(ref, "pipeline_id"):
            raise ApiError(400, "pipeline_version_reference needs a pipeline_id")
        pipeline_id = _text(ref, "pipeline_id")
        version_id = _text(ref, "pipeline_version_id")
        version = (
            store.version(pipeline_id, version_id)
            if version_id
            else store.latest_version(pipeline_id)
        )
        version_id = version["pipeline_version_id"]
        ir = parse_spec(version["pipeline_spec"])
    runtime_config = doc.get("runtime_config") or {}
    check_submission(ir, runtime_config)
    experiment_id = _text(doc, "experiment_id")
    experiment = (
        store.experiment(experiment_id)
        if experiment_id
        else store.default_experiment(_text(doc, "namespace"))
    )
    if experiment["storage_state"] == "ARCHIVED":
        raise ApiError(400, f"experiment {experiment['experiment_id']} is archived: unarchive it")
    return {
        "experiment_id": experiment["experiment_id"],
        "namespace": experiment["namespace"],
        "display_name": _text(doc, "display_name", required=True),
        "description": _text(doc, "description"),
        "pipeline_spec": spec,
        "pipeline_id": pipeline_id,
        "pipeline_version_id": version_id,
        "runtime_config": dict(runtime_config),
    }


@route("POST", "/runs")
def create_run(state: ServerState, call: Call) -> Any:
    row = state.store.create_run(_submission(state.store, _obj(call)))
    state.queue.wake()
    return run_json(row, metadata_url=state.metadata_url, details=False)


@route("GET", "/runs/{run_id}")
def get_run(state: ServerState, call: Call) -> Any:
    run = state.store.run(call.params["run_id"])
    return run_json(run, metadata_url=state.metadata_url, details=True)


@route("GET", "/runs")
def list_runs(state: ServerState, call: Call) -> Any:
    query = list_query(
        call.query,
        id_key="run_id",
        sort_keys=("created_at", "display_name", "finished_at", "scheduled_at"),
        filter_keys=(
            "display_name",
            "created_at",
            "finished_at",
            "storage_state",
            "state",
            "experiment_id",
            "namespace",
            "description",
        ),
    )
    conds = []
    if _q(call, "experiment_id"):
        conds.append(KFP_RUNS.c.experiment_id == _q(call, "experiment_id"))
    if _q(call, "namespace"):
        conds.append(KFP_RUNS.c.namespace == _q(call, "namespace"))
    rows, total = state.store.page(KFP_RUNS, query, *conds)
    runs = [run_json(r, metadata_url=state.metadata_url, details=False) for r in rows]
    return _page(runs, "runs", total, query.next_token(total))


@route("POST", "/runs/{run_id}:terminate")
def terminate_run(state: ServerState, call: Call) -> Any:
    run = state.store.run(call.params["run_id"])
    if run["state"] in FINAL:
        raise ApiError(409, f"run {run['run_id']} has ended ({run['state']}): nothing to stop")
    state.queue.terminate(run)


@route("POST", "/runs/{run_id}:retry")
def retry_run(state: ServerState, call: Call) -> Any:
    run = state.store.run(call.params["run_id"])
    if not state.store.update_run(
        run["run_id"],
        when=("FAILED", "CANCELED"),
        state="PENDING",
        finished_at=None,
        error=None,
        starts=0,
    ):
        raise ApiError(
            409, f"run {run['run_id']} is {run['state']}: only a FAILED or CANCELED run retries"
        )
    state.queue.wake()


@route("POST", "/runs/{run_id}:archive")
def archive_run(state: ServerState, call: Call) -> Any:
    state.store.run(call.params["run_id"])
    state.store.update_run(call.params["run_id"], storage_state="ARCHIVED")


@route("POST", "/runs/{run_id}:unarchive")
def unarchive_run(state: ServerState, call: Call) -> Any:
    state.store.run(call.params["run_id"])
    state.store.update_run(call.params["run_id"], storage_state="AVAILABLE")


@route("DELETE", "/runs/{run_id}")
def delete_run(state: ServerState, call: Call) -> Any:
    from headwater.api.runs import delete_run as delete_headwater_run

    run = state.store.run(call.params["run_id"])
    if run["state"] in (*ACTIVE, "PENDING"):
        raise ApiError(409, f"run {run['run_id']} is {run['state']}: terminate it first")
    with contextlib.suppress(NotFoundError):  # never started (canceled while queued)
        delete_headwater_run(run["run_id"], metadata=state.metadata_url)
    state.store.delete_run(run["run_id"])


# -- recurring runs -------------------------------------------------------------------------


def _recurring(row: Record) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "recurring_run_id": row["recurring_run_id"],
        "display_name": row["display_name"],
        "description": row["description"],
        "runtime_config": row["runtime_config"],
        "service_account": "",
        "max_concurrency": str(row["max_concurrency"]),
        "trigger": row["trigger"],
        "mode": "ENABLE" if row["status"] == "ENABLED" else "DISABLE",
        "status": row["status"],
        "created_at": rfc3339(row["created_at"]),
        "updated_at": rfc3339(row["updated_at"]),
        "no_catchup": bool(row["no_catchup"]),
        "namespace": row["namespace"],
        "experiment_id": row["experiment_id"],
    }
    if row["pipeline_spec"] is not None:
        doc["pipeline_spec"] = row["pipeline_spec"]
    else:
        doc["pipeline_version_reference"] = {
            "pipeline_id": row["pipeline_id"],
            "pipeline_version_id": row["pipeline_version_id"],
        }
    return doc


@route("POST", "/recurringruns")
def create_recurring_run(state: ServerState, call: Call) -> Any:
    import time

    from headwater.server.schedule import parse_trigger

    doc = _obj(call)
    trigger, stored = parse_trigger(doc.get("trigger"))
    raw = doc.get("max_concurrency") or 1
    try:
        concurrency = int(raw)  # int64: a number or a string
    except (TypeError, ValueError) as exc:
        raise ApiError(400, f"max_concurrency {raw!r}: a number from 1 to 10") from exc
    if not 1 <= concurrency <= 10:
        raise ApiError(400, f"max_concurrency must be from 1 to 10, got {concurrency}")
    mode = doc.get("mode") or "ENABLE"
    if mode not in ("ENABLE", "DISABLE"):
        raise ApiError(400, f"mode {mode!r}: ENABLE or DISABLE")
    no_catchup = doc.get("no_catchup") or False
    if not isinstance(no_catchup, bool):
        raise ApiError(400, f"no_catchup must be true or false, got {no_catchup!r}")
    row = state.store.create_recurring_run(
        {
            **_submission(state.store, doc),
            "trigger": stored,
            "max_concurrency": concurrency,
            "no_catchup": int(no_catchup),
            "status": "ENABLED" if mode == "ENABLE" else "DISABLED",
            "next_fire_at": trigger.next_after(time.time()),
        }
    )
    state.queue.wake()
    return _recurring(row)


@route("GET", "/recurringruns/{recurring_run_id}")
def get_recurring_run(state: ServerState, call: Call) -> Any:
    return _recurring(state.store.recurring_run(call.params["recurring_run_id"]))


@route("GET", "/recurringruns")
def list_recurring_runs(state: ServerState, call: Call) -> Any:
    from headwater.metadata.schema import KFP_RECURRING_RUNS as TABLE

    query = list_query(
        call.query,
        id_key="recurring_run_id",
        sort_keys=("created_at", "display_name", "updated_at"),
        filter_keys=("display_name", "created_at", "status", "experiment_id", "namespace"),
    )
    conds = []
    if _q(call, "experiment_id"):
        conds.append(TABLE.c.experiment_id == _q(call, "experiment_id"))
    if _q(call, "namespace"):
        conds.append(TABLE.c.namespace == _q(call, "namespace"))
    rows, total = state.store.page(TABLE, query, *conds)
    # The one key upstream does not write in snake_case (its proto field is so named).
    return _page([_recurring(r) for r in rows], "recurringRuns", total, query.next_token(total))


@route("POST", "/recurringruns/{recurring_run_id}:enable")
def enable_recurring_run(state: ServerState, call: Call) -> Any:
    import time

    from headwater.server.schedule import trigger_of

    row = state.store.recurring_run(call.params["recurring_run_id"])
    following = trigger_of(row["trigger"]).next_after(time.time())
    state.store.update_recurring_run(
        row["recurring_run_id"], status="ENABLED", next_fire_at=following
    )
    state.queue.wake()


@route("POST", "/recurringruns/{recurring_run_id}:disable")
def disable_recurring_run(state: ServerState, call: Call) -> Any:
    row = state.store.recurring_run(call.params["recurring_run_id"])
    state.store.update_recurring_run(row["recurring_run_id"], status="DISABLED")


@route("DELETE", "/recurringruns/{recurring_run_id}")
def delete_recurring_run(state: ServerState, call: Call) -> Any:
    state.store.delete_recurring_run(call.params["recurring_run_id"])
