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
from headwater.server.router import Call, Listing, ServerState, register_list, route, scoped

if TYPE_CHECKING:
    from headwater.spec.ir import PipelineIR


@route("GET", "/healthz")
def healthz(state: ServerState, call: Call) -> Any:
    from importlib.metadata import version

    return {
        "multi_user": False,
        "pipeline_store": "database",
        "commit_sha": "",
        "tag_name": f"headwater {version('headwater')}",
    }


# -- experiments ------------------------------------------------------------------------------


def experiment(state: ServerState, experiment_id: str) -> ExperimentRecord:
    """The experiment, or NotFoundError."""
    found = state.store.get_experiment(experiment_id)
    if found is None:
        raise NotFoundError(f"no experiment with id {experiment_id!r}")
    return found


@route("POST", "/experiments")
def create_experiment(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    name, namespace = text(doc, "display_name", required=True), text(doc, "namespace")
    row = ExperimentRecord(
        str(uuid.uuid4()), name, text(doc, "description"), namespace, "AVAILABLE", time.time()
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
    return experiment_json(experiment(state, call.params["experiment_id"]))


@route("POST", "/experiments/{experiment_id}:archive")
def archive_experiment(state: ServerState, call: Call) -> Any:
    state.store.set_experiment_storage(call.params["experiment_id"], "ARCHIVED")


@route("POST", "/experiments/{experiment_id}:unarchive")
def unarchive_experiment(state: ServerState, call: Call) -> Any:
    state.store.set_experiment_storage(call.params["experiment_id"], "AVAILABLE")


@route("DELETE", "/experiments/{experiment_id}")
def delete_experiment(state: ServerState, call: Call) -> Any:
    state.store.delete_experiment(call.params["experiment_id"])


# -- pipelines and versions ---------------------------------------------------------------------


def pipeline(state: ServerState, pipeline_id: str) -> PipelineRecord:
    """The named pipeline, or NotFoundError."""
    found = state.store.get_pipeline(pipeline_id)
    if found is None:
        raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
    return found


def version(state: ServerState, pipeline_id: str, version_id: str) -> VersionRecord:
    """The pipeline's uploaded version, or NotFoundError."""
    found = state.store.get_version(version_id)
    if found is None or found.pipeline_id != pipeline_id:
        raise NotFoundError(f"pipeline {pipeline_id} has no version {version_id!r}")
    return found


def new_version(
    ir: PipelineIR, pipeline_id: str, display_name: str, description: str
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
    )


def _new_pipeline(
    state: ServerState, name: str, description: str, namespace: str, ir: PipelineIR | None
) -> PipelineRecord:
    """A named pipeline, with its first version (named as the pipeline) when given one."""
    row = PipelineRecord(str(uuid.uuid4()), name, description, namespace, time.time())
    first = None if ir is None else new_version(ir, row.pipeline_id, name, description)
    return state.store.create_pipeline(row, first)


@route("POST", "/pipelines/upload")
def upload_pipeline(state: ServerState, call: Call) -> Any:
    ir, filename = uploaded_spec(call.content_type, call.raw)
    name = call.q("display_name") or call.q("name") or spec_name(ir, filename)
    return pipeline_json(_new_pipeline(state, name, call.q("description"), call.q("namespace"), ir))


@route("POST", "/pipelines/upload_version")
def upload_version(state: ServerState, call: Call) -> Any:
    ir, filename = uploaded_spec(call.content_type, call.raw)
    pipeline_id = call.q("pipelineid")
    if not pipeline_id:
        raise InvalidArgumentError("pipelineid is required: the pipeline to add a version to")
    name = call.q("display_name") or call.q("name") or filename
    made = state.store.create_version(new_version(ir, pipeline_id, name, call.q("description")))
    return version_json(made)


@route("POST", "/pipelines")
def create_pipeline(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    name = text(doc, "display_name") or text(doc, "name", required=True)
    return pipeline_json(
        _new_pipeline(state, name, text(doc, "description"), text(doc, "namespace"), None)
    )


@route("POST", "/pipelines/create")
def create_pipeline_and_version(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    given, version_doc = doc.get("pipeline"), doc.get("pipeline_version")
    if not isinstance(given, dict) or not isinstance(version_doc, dict):
        raise InvalidArgumentError("send {pipeline: {...}, pipeline_version: {pipeline_spec: ...}}")
    ir = _version_ir(version_doc)
    name = text(given, "display_name") or text(given, "name", required=True)
    row = PipelineRecord(
        str(uuid.uuid4()), name, text(given, "description"), text(given, "namespace"), time.time()
    )
    vname = text(version_doc, "display_name") or text(version_doc, "name") or name
    first = new_version(ir, row.pipeline_id, vname, text(version_doc, "description"))
    return pipeline_json(state.store.create_pipeline(row, first))


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
    found = state.store.pipeline_named(name, namespace)
    if found is None:
        raise NotFoundError(f"no pipeline named {name!r} in namespace {namespace!r}")
    return pipeline_json(found)


@route("GET", "/pipelines/{pipeline_id}")
def get_pipeline(state: ServerState, call: Call) -> Any:
    return pipeline_json(pipeline(state, call.params["pipeline_id"]))


@route("DELETE", "/pipelines/{pipeline_id}")
def delete_pipeline(state: ServerState, call: Call) -> Any:
    cascade = call.q("cascade").lower() == "true"
    state.store.delete_pipeline(call.params["pipeline_id"], cascade=cascade)


@route("POST", "/pipelines/{pipeline_id}/versions")
def create_version(state: ServerState, call: Call) -> Any:
    doc = body_object(call.body)
    ir = _version_ir(doc)
    name = text(doc, "display_name") or text(doc, "name", required=True)
    made = new_version(ir, call.params["pipeline_id"], name, text(doc, "description"))
    return version_json(state.store.create_version(made))


@route("GET", "/pipelines/{pipeline_id}/versions/{version_id}")
def get_version(state: ServerState, call: Call) -> Any:
    return version_json(version(state, call.params["pipeline_id"], call.params["version_id"]))


@route("DELETE", "/pipelines/{pipeline_id}/versions/{version_id}")
def delete_version(state: ServerState, call: Call) -> Any:
    found = version(state, call.params["pipeline_id"], call.params["version_id"])
    state.store.delete_version(found.pipeline_version_id)


def _versions_of(state: ServerState, call: Call) -> tuple[Predicate, ...]:
    pipeline(state, call.params["pipeline_id"])
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
        scope=scoped("namespace"),
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
