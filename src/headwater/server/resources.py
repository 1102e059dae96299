"""KFP's experiments, pipelines and pipeline versions, and the health check: routes that parse,
call the store and convert (`server.router` answers and maps errors)."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from headwater.errors import ConflictError, InvalidArgumentError, NotFoundError
from headwater.metadata.base import (
    ExperimentRecord,
    PipelineRecord,
    Predicate,
    VersionRecord,
)
from headwater.metadata.encoding import ir_digest
from headwater.server.kfp.convert import experiment_json, pipeline_json, version_json
from headwater.server.kfp.requests import (
    body_object,
    parse_ir,
    spec_name,
    text,
    uploaded_spec,
)
from headwater.server.kfp.wire import ListSpec
from headwater.server.router import (
    Call,
    Listing,
    ServerState,
    namespace_scope,
    register_list,
    route,
    scoped,
)

if TYPE_CHECKING:
    from headwater.spec.ir import PipelineIR


@route("GET", "/healthz")
def healthz(state: ServerState, call: Call) -> Any:
    from importlib.metadata import version

    multi_user = state.gate is not None and state.gate.multi_user()
    mode = state.settings.sandbox
    sandboxed = mode == "always" or (mode == "auto" and multi_user)
    answer = {
        "multi_user": multi_user,
        # Headwater's own: whether each task runs in a sandbox of its own (`headwater.sandbox`).
        "tasks_sandboxed": sandboxed,
        "pipeline_store": "database",
        "commit_sha": "",
        "tag_name": f"headwater {version('headwater')}",
    }
    if multi_user and not sandboxed:
        answer["warning"] = (
            "started with --no-sandbox: tasks are not isolated; any editor's component can read "
            "the server's files, environment and other namespaces' artifacts"
        )
    return answer


# -- experiments ------------------------------------------------------------------------------


def experiment(
    state: ServerState, experiment_id: str, call: Call | None = None, *, write: bool = False
) -> ExperimentRecord:
    """The experiment, or NotFoundError; with `call`, allowed to its principal (to change,
    with `write`), or PermissionDeniedError."""
    found = state.store.get_experiment(experiment_id)
    if found is None:
        raise NotFoundError(f"no experiment with id {experiment_id!r}")
    if call is not None:
        call.allow(found.namespace, f"experiment {experiment_id}", write=write)
    return found


@route("POST", "/experiments")
def create_experiment(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    name = text(doc, "display_name", required=True)
    namespace = call.who.default_namespace(text(doc, "namespace"), "An experiment")
    call.allow(namespace, f"experiments of namespace {namespace!r}", write=True)
    row = ExperimentRecord(
        str(uuid.uuid4()),
        name,
        text(doc, "description"),
        namespace,
        "AVAILABLE",
        time.time(),
        created_by=call.who.created_by,
    )
    try:
        return experiment_json(state.store.create_experiment(row))
    except ConflictError:
        # `kfp.Client` creates an experiment only after finding none by that name: clients
        # racing to create the same one (the first runs of a team) all get it, where upstream
        # answers all but one with 409.
        found = state.store.experiment_named(name, namespace)
        if found is None:
            raise
        return experiment_json(found)


@route("GET", "/experiments/{experiment_id}")
def get_experiment(state: ServerState, call: Call) -> Any:
    return experiment_json(experiment(state, call.params["experiment_id"], call))


@route("POST", "/experiments/{experiment_id}:archive")
def archive_experiment(state: ServerState, call: Call) -> Any:
    experiment(state, call.params["experiment_id"], call, write=True)
    state.store.set_experiment_storage(call.params["experiment_id"], "ARCHIVED")


@route("POST", "/experiments/{experiment_id}:unarchive")
def unarchive_experiment(state: ServerState, call: Call) -> Any:
    experiment(state, call.params["experiment_id"], call, write=True)
    state.store.set_experiment_storage(call.params["experiment_id"], "AVAILABLE")


@route("DELETE", "/experiments/{experiment_id}")
def delete_experiment(state: ServerState, call: Call) -> Any:
    experiment(state, call.params["experiment_id"], call, write=True)
    state.store.delete_experiment(call.params["experiment_id"])


# -- pipelines and versions ---------------------------------------------------------------------


def pipeline(
    state: ServerState, pipeline_id: str, call: Call | None = None, *, write: bool = False
) -> PipelineRecord:
    """The named pipeline, or NotFoundError; with `call`, allowed to its principal (see
    `allow_pipeline`)."""
    found = state.store.get_pipeline(pipeline_id)
    if found is None:
        raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
    if call is not None:
        allow_pipeline(call, found, write=write)
    return found


def allow_pipeline(call: Call, found: PipelineRecord, *, write: bool = False) -> None:
    """A pipeline in a namespace is its namespace's; a shared one (no namespace) every
    principal reads, and only its creator or an admin changes (adds versions, deletes).

    Raises:
        PermissionDeniedError: The principal may not.
    """
    what = f"pipeline {found.pipeline_id}"
    if found.namespace or not call.who.multi_user:
        call.allow(found.namespace, what, write=write)
        return
    call.noted.setdefault("namespace", "")
    if write and not (call.who.is_admin or call.who.name == found.created_by):
        call.who.check_admin(f"change the shared {what}, which {found.created_by or 'no one'} made")


def version(
    state: ServerState,
    pipeline_id: str,
    version_id: str,
    call: Call | None = None,
    *,
    write: bool = False,
) -> VersionRecord:
    """The pipeline's uploaded version, or NotFoundError; with `call`, allowed to its
    principal as its pipeline is."""
    if call is not None:
        pipeline(state, pipeline_id, call, write=write)
    found = state.store.get_version(version_id)
    if found is None or found.pipeline_id != pipeline_id:
        raise NotFoundError(f"pipeline {pipeline_id} has no version {version_id!r}")
    return found


def new_version(
    ir: PipelineIR,
    pipeline_id: str,
    display_name: str,
    description: str,
    created_by: str | None = None,
) -> VersionRecord:
    """A version record of `ir`, uploaded to `pipeline_id` as `display_name`."""
    raw = dict(ir.raw)
    return VersionRecord(
        pipeline_version_id=str(uuid.uuid4()),
        pipeline_id=pipeline_id,
        name=ir.name,
        digest=ir_digest(raw),
        display_name=display_name,
        description=description,
        ir=raw,
        created_at=time.time(),
        created_by=created_by,
    )


def _new_pipeline(
    state: ServerState,
    call: Call,
    name: str,
    description: str,
    namespace: str,
    ir: PipelineIR | None,
    version_name: str = "",
    version_description: str | None = None,
) -> PipelineRecord:
    """A named pipeline, with its first version (named as the pipeline) when given one.

    Without a namespace it is shared, as KFP's (any editor may make one)."""
    if namespace:
        call.allow(namespace, f"pipelines of namespace {namespace!r}", write=True)
    by = call.who.created_by
    row = PipelineRecord(str(uuid.uuid4()), name, description, namespace, time.time(), by)
    first = (
        None
        if ir is None
        else new_version(
            ir,
            row.pipeline_id,
            version_name or name,
            description if version_description is None else version_description,
            by,
        )
    )
    return state.store.create_pipeline(row, first)


@route("POST", "/pipelines/upload")
def upload_pipeline(state: ServerState, call: Call) -> Any:
    ir, filename = uploaded_spec(call.content_type, call.raw)
    name = call.q("display_name") or call.q("name") or spec_name(ir, filename)
    return pipeline_json(
        _new_pipeline(state, call, name, call.q("description"), call.q("namespace"), ir)
    )


@route("POST", "/pipelines/upload_version")
def upload_version(state: ServerState, call: Call) -> Any:
    ir, filename = uploaded_spec(call.content_type, call.raw)
    pipeline_id = call.q("pipelineid")
    if not pipeline_id:
        raise InvalidArgumentError("pipelineid is required: the pipeline to add a version to")
    pipeline(state, pipeline_id, call, write=True)
    name = call.q("display_name") or call.q("name") or filename
    made = state.store.create_version(
        new_version(ir, pipeline_id, name, call.q("description"), call.who.created_by)
    )
    return version_json(made)


@route("POST", "/pipelines")
def create_pipeline(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    name = text(doc, "display_name") or text(doc, "name", required=True)
    return pipeline_json(
        _new_pipeline(state, call, name, text(doc, "description"), text(doc, "namespace"), None)
    )


@route("POST", "/pipelines/create")
def create_pipeline_and_version(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    given, version_doc = doc.get("pipeline"), doc.get("pipeline_version")
    if not isinstance(given, dict) or not isinstance(version_doc, dict):
        raise InvalidArgumentError("send {pipeline: {...}, pipeline_version: {pipeline_spec: ...}}")
    ir = _version_ir(version_doc)
    name = text(given, "display_name") or text(given, "name", required=True)
    vname = text(version_doc, "display_name") or text(version_doc, "name") or name
    made = _new_pipeline(
        state,
        call,
        name,
        text(given, "description"),
        text(given, "namespace"),
        ir,
        vname,
        text(version_doc, "description"),
    )
    return pipeline_json(made)


def _version_ir(doc: dict[str, Any]) -> PipelineIR:
    if doc.get("pipeline_spec") is None:
        if doc.get("package_url"):
            raise InvalidArgumentError(
                "pipeline_version.package_url is not supported by headwater server: send the "
                "spec itself in pipeline_spec, or upload the file"
            )
        raise InvalidArgumentError("pipeline_version.pipeline_spec is required")
    return parse_ir(doc["pipeline_spec"])


@route("GET", "/pipelines/names/{name}")
def get_pipeline_by_name(state: ServerState, call: Call) -> Any:
    name, namespace = call.params["name"], call.q("namespace")
    if namespace:
        call.allow(namespace, f"pipelines of namespace {namespace!r}")
    found = state.store.pipeline_named(name, namespace)
    if found is None:
        raise NotFoundError(f"no pipeline named {name!r} in namespace {namespace!r}")
    return pipeline_json(found)


@route("GET", "/pipelines/{pipeline_id}")
def get_pipeline(state: ServerState, call: Call) -> Any:
    return pipeline_json(pipeline(state, call.params["pipeline_id"], call))


@route("DELETE", "/pipelines/{pipeline_id}")
def delete_pipeline(state: ServerState, call: Call) -> Any:
    pipeline(state, call.params["pipeline_id"], call, write=True)
    cascade = call.q("cascade").lower() == "true"
    state.store.delete_pipeline(call.params["pipeline_id"], cascade=cascade)


@route("POST", "/pipelines/{pipeline_id}/versions")
def create_version(state: ServerState, call: Call) -> Any:
    pipeline(state, call.params["pipeline_id"], call, write=True)
    doc = body_object(call.body)
    ir = _version_ir(doc)
    name = text(doc, "display_name") or text(doc, "name", required=True)
    made = new_version(
        ir, call.params["pipeline_id"], name, text(doc, "description"), call.who.created_by
    )
    return version_json(state.store.create_version(made))


@route("GET", "/pipelines/{pipeline_id}/versions/{version_id}")
def get_version(state: ServerState, call: Call) -> Any:
    found = version(state, call.params["pipeline_id"], call.params["version_id"], call)
    return version_json(found)


@route("DELETE", "/pipelines/{pipeline_id}/versions/{version_id}")
def delete_version(state: ServerState, call: Call) -> Any:
    found = version(state, call.params["pipeline_id"], call.params["version_id"], call, write=True)
    state.store.delete_version(found.pipeline_version_id)


def _versions_of(state: ServerState, call: Call) -> tuple[Predicate, ...]:
    pipeline(state, call.params["pipeline_id"], call)
    return (Predicate("pipeline_id", "EQUALS", call.params["pipeline_id"]),)


for _listing in (
    Listing(
        path="/experiments",
        kind="experiments",
        key="experiments",
        spec=ListSpec(
            id_key="experiment_id",
            sort_keys=("created_at", "display_name"),
            filter_keys=("display_name", "created_at", "storage_state", "namespace", "description"),
        ),
        scope=scoped("namespace"),
        convert=lambda state, rows: [experiment_json(r) for r in rows],
    ),
    Listing(
        path="/pipelines",
        kind="pipelines",
        key="pipelines",
        spec=ListSpec(
            id_key="pipeline_id",
            sort_keys=("created_at", "display_name"),
            filter_keys=("display_name", "created_at", "namespace", "description"),
        ),
        scope=lambda state, call: namespace_scope(call, shared=True),
        convert=lambda state, rows: [pipeline_json(r) for r in rows],
    ),
    Listing(
        path="/pipelines/{pipeline_id}/versions",
        kind="versions",
        key="pipeline_versions",
        spec=ListSpec(
            id_key="pipeline_version_id",
            sort_keys=("created_at", "display_name"),
            filter_keys=("display_name", "created_at", "description"),
        ),
        scope=_versions_of,
        convert=lambda state, rows: [version_json(r) for r in rows],
    ),
):
    register_list(_listing)
