"""The JSON API under `/api/v1`: runs (list, show, graph, start, terminate, retry, delete), tasks'
logs, artifacts with previews, downloads and profiler traces, lineage, comparison, and the model
registry (list, change a version's stage). Experiments, pipelines and recurring runs are in
`catalog_routes`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from headwater.ui import data
from headwater.ui.access import allow_start, list_namespaces, note, readable_runs
from headwater.ui.app_state import metadata_of, principal_of
from headwater.ui.control import RunControl
from headwater.ui.groups import ITERATIONS_SHOWN

router = APIRouter(tags=["api"])


@router.get("/whoami", summary="Who you are: your principal, role and namespaces")
def whoami(request: Request) -> dict[str, Any]:
    """`{"name", "kind", "role", "namespaces", "admin", "multi_user"}`; `multi_user` is false
    on a server without tokens or a trusted proxy (anyone on loopback, or its one token)."""
    who = principal_of(request)
    namespaces = sorted(who.namespaces)
    if who.is_admin and who.multi_user:
        store = request.app.state.gate.store()
        namespaces = [] if store is None else store.namespaces()
    return {
        "name": who.name,
        "kind": who.kind,
        "role": who.role,
        "namespaces": namespaces,
        "admin": who.is_admin,
        "multi_user": who.multi_user,
    }


@router.get("/runs", summary="A page of runs, newest first")
def list_runs(
    request: Request,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
    pipeline: str | None = None,
    state: str | None = None,
    q: str | None = Query(
        None,
        description="a run id prefix, or part of the pipeline, run or experiment name or state",
    ),
    experiment: str | None = Query(None, description="only runs of this experiment (its id)"),
    recurring_run: str | None = Query(None, description="only runs this recurring run made"),
    namespace: str = Query("", description="only this namespace (default: every one you hold)"),
) -> dict[str, Any]:
    """Runs with run_id, pipeline, state, times, duration_s, metrics, `executor` (the
    executors its tasks ran on), `cached` (every task a cache hit) and `tasks`; `next_offset`
    is the offset of the next page, or null on the last. `pipelines` and `metrics` are those
    of the page, `columns` the metrics its table shows by default (one pipeline: all of its
    own; several: those every one of them logs, at most 4)."""
    return data.runs_page(
        metadata=metadata_of(request), limit=limit, offset=offset, pipeline=pipeline,
        state=state, q=q, experiment_id=experiment, recurring_run_id=recurring_run,
        namespaces=list_namespaces(request, namespace),
    )  # fmt: skip


class PipelineSource(BaseModel):
    """A pipeline: a `path` on the server's machine, or uploaded `content` with its
    `filename` (whose suffix, .py, .yaml, .yml or .json, says how to read it)."""

    path: str | None = None
    content: str | None = None
    filename: str | None = None
    pipeline_name: str | None = Field(None, description="which pipeline of a .py file")

    def resolved(self, *, team: bool = False) -> str:
        """The path to load: `path`, or where the upload was saved.

        On a team's server (`team`) only an uploaded compiled pipeline is read: a `.py` file
        would run its code in the server, and a path would name the server's own files.
        """
        from headwater.errors import InvalidArgumentError, PermissionDeniedError
        from headwater.ui.launch import save_upload

        if (self.path is None) == (self.content is None):
            raise InvalidArgumentError("give either 'path' or 'content' (with 'filename')")
        compiled = (self.filename or "").lower().endswith((".yaml", ".yml", ".json"))
        if team and (self.path is not None or not compiled):
            raise PermissionDeniedError(
                "a team's server reads only an uploaded compiled pipeline (.yaml or .json, from "
                "kfp's compiler or `headwater compile`): a .py file would run its code in the "
                "server, and a path would name the server's own files"
            )
        if self.content is not None:
            return str(save_upload(self.content, self.filename or "pipeline.yaml"))
        return str(self.path)


class RunRequest(PipelineSource):
    """A pipeline (a file, or with `headwater server` an uploaded version) and the values of
    its parameters (defaults fill the rest); with `headwater server`, the run's name and
    experiment too."""

    parameters: dict[str, Any] = Field(default_factory=dict)
    pipeline_version_id: str | None = Field(None, description="an uploaded pipeline version")
    display_name: str = Field("", description="the run's name (default: pipeline and time)")
    experiment_id: str = Field("", description="its experiment (default: Default)")
    namespace: str = Field(
        "", description="without an experiment, the namespace whose Default it goes to"
    )


@router.post("/pipelines", summary="A pipeline's parameters (uploads are saved)")
def pipeline_parameters(request: Request, source: PipelineSource) -> dict[str, Any]:
    """`{"path", "pipeline", "parameters": [{"name", "type", "kind", "required", "default"}]}`;
    `path` is where an upload was saved, to start runs of it by path (on a team's server,
    only uploads of compiled pipelines: 403 otherwise)."""
    from headwater.ui.launch import pipeline_form

    team = principal_of(request).multi_user
    return pipeline_form(source.resolved(team=team), pipeline_name=source.pipeline_name)


@router.post("/runs", summary="Start a run")
def start_run(request: Request, body: RunRequest) -> dict[str, Any]:
    """Start the pipeline with these parameters: `{"run_id", "url"}` once the run is recorded
    (with `headwater server`, queued like every run it takes). A bad pipeline or parameter is
    a 400 and nothing runs."""
    from headwater.spec.loader import load_pipeline

    runs: RunControl = request.app.state.runs
    namespace = allow_start(request, body.experiment_id, body.namespace, body.pipeline_version_id)
    ir = None
    if not body.pipeline_version_id:
        team = principal_of(request).multi_user
        ir = load_pipeline(body.resolved(team=team), pipeline_name=body.pipeline_name)
    run_id = runs.start(
        ir=ir,
        version_id=body.pipeline_version_id or "",
        arguments=body.parameters,
        display_name=body.display_name,
        experiment_id=body.experiment_id,
        namespace=namespace,
        created_by=principal_of(request).created_by,
    )
    note(request, None, run_id)
    return {"run_id": run_id, "url": f"/runs/{run_id}"}


@router.post("/runs/{run_id}/terminate", summary="Stop a queued or running run")
def terminate_run(request: Request, run_id: str) -> dict[str, Any]:
    """The run is CANCELED (at once if it waits in the queue); 409 if it has ended."""
    request.app.state.runs.terminate(run_id)
    return {"run_id": run_id}


@router.post("/runs/{run_id}/retry", summary="Run a failed or canceled run again")
def retry_run(request: Request, run_id: str) -> dict[str, Any]:
    """The run is queued again and resumed, reusing every task that succeeded; 409 unless it
    is FAILED, CANCELED or INTERRUPTED."""
    request.app.state.runs.retry(run_id)
    return {"run_id": run_id}


_ITERATIONS = Query(
    ITERATIONS_SHOWN,
    ge=1,
    le=1000,
    description="iterations drawn per loop; the rest fold into a '+K more' node",
)


@router.get("/runs/{run_id}", summary="A run with its tasks and graph")
def get_run(request: Request, run_id: str, iterations: int = _ITERATIONS) -> dict[str, Any]:
    """The run, its tasks (states, inputs, outputs, artifacts, durations, errors, cache) and
    its graph laid out top-down (as `GET /runs/{run_id}/graph`)."""
    return data.run_view(run_id, metadata=metadata_of(request), iterations=iterations)


@router.get("/runs/{run_id}/graph", summary="A run's task graph with its groups")
def get_graph(request: Request, run_id: str, iterations: int = _ITERATIONS) -> dict[str, Any]:
    """Nodes (the run's plan: tasks recorded and, `planned`, still to start; and "+K more"
    nodes standing for a loop's folded iterations) with their states, durations and groups,
    edges, and the groups: nested pipelines, loops (labelled with their number of
    iterations), iterations (labelled with their item) and conditions (with their test),
    each with the tasks it holds by state and whether the page draws it `collapsed` at first."""
    view = data.run_view(run_id, metadata=metadata_of(request), iterations=iterations)
    graph: dict[str, Any] = view["graph"]
    return graph


@router.get("/runs/{run_id}/steps", summary="A run's metrics over steps")
def get_steps(request: Request, run_id: str) -> dict[str, Any]:
    """The series its tasks logged beside Metrics artifacts (XGBoost's rounds, Lightning's
    epochs, `headwater.log_step`), each at most 1000 points (`logged` says how many there
    were), and a chart per metric name: `{"series", "charts", "more"}`."""
    return data.steps_view([run_id], metadata=metadata_of(request))


@router.get("/runs/{run_id}/trials", summary="A tuning run's trials")
def get_trials(request: Request, run_id: str) -> dict[str, Any]:
    """`{"objective", "minimize", "parameters", "trials": [{"trial", "round", "task",
    "parameters", "objective", "status", "error", "best_so_far"}], "best", "count",
    "shown"}`; `trials` is empty for a run that is not a tuning."""
    found = data.trials_of(run_id, metadata=metadata_of(request))
    if found is None:
        return {"objective": None, "minimize": None, "parameters": [], "trials": [],
                "best": None, "count": 0, "shown": 0}  # fmt: skip
    return found


@router.delete("/runs/{run_id}", summary="Delete a run")
def remove_run(request: Request, run_id: str) -> dict[str, Any]:
    """Delete the run, its tasks and logs, and the artifacts no other run uses; 409 while it
    is queued or running. `{"run_id", "artifact_uris"}`: the run's full id (`run_id` may be
    a unique prefix of it) and the URIs of the artifacts deleted with it
    (`headwater.api.runs.DeletedRun`)."""
    runs: RunControl = request.app.state.runs
    return runs.delete(run_id).to_json()


@router.get(
    "/runs/{run_id}/tasks/{task}/log",
    summary="A task's log",
    response_class=PlainTextResponse,
)
def task_log(
    request: Request,
    run_id: str,
    task: str,
    tail: int | None = Query(None, ge=1, le=100_000),
    download: bool = False,
) -> Any:
    """The last `tail` lines of the log, or the whole file (`download=true` as an attachment)."""
    path = data.log_path(run_id, task, metadata=metadata_of(request))
    if tail is not None:
        return PlainTextResponse(data.log_tail(path, tail))
    name = f"{run_id[:8]}-{task}.log".replace("/", "_")
    return FileResponse(
        path,
        media_type="text/plain; charset=utf-8",
        filename=name if download else None,
        content_disposition_type="attachment" if download else "inline",
    )


@router.get(
    "/artifacts/{artifact_id}/traces/{name:path}",
    summary="A profiler trace file kept in an artifact",
    response_class=FileResponse,
)
def artifact_trace(request: Request, artifact_id: int, name: str) -> Any:
    """The trace file `name` (as the artifact's `traces` list names it), streamed as an
    attachment to open in Perfetto or chrome://tracing. A path that leads out of the
    artifact is a 404."""
    from headwater.ui.traces import media_type

    path = data.trace_path(artifact_id, name, metadata=metadata_of(request))
    return FileResponse(
        path,
        media_type=media_type(name),
        filename=name.rsplit("/", 1)[-1],
        content_disposition_type="attachment",
    )


@router.get(
    "/artifacts/{artifact_id}/download",
    summary="An artifact's content: a file as itself, a folder as a .tar.gz",
    response_class=Response,
)
def download_artifact(request: Request, artifact_id: int) -> Any:
    """The artifact's bytes as an attachment. Only an artifact inside an artifact store its
    run wrote to is served (404 otherwise), at most `HEADWATER_ARTIFACT_READ_LIMIT` bytes
    (400 over it); an S3 or GCS artifact is read through its store."""
    from headwater.api.exports import export_artifact

    export = export_artifact(artifact_id, metadata=metadata_of(request))
    return Response(
        export.data,
        media_type=export.media_type,
        headers={"Content-Disposition": _attachment(export.filename)},
    )


def _attachment(filename: str) -> str:
    from urllib.parse import quote

    plain = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename
    )
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename)}"


@router.get("/artifacts/{ref:path}", summary="An artifact with a preview")
def get_artifact(request: Request, ref: str) -> dict[str, Any]:
    """The artifact's record and a preview by type (metrics, classification, markdown,
    html, table, text). `ref` is an id or a URI."""
    return data.artifact_view(ref, metadata=metadata_of(request))


@router.get("/lineage/{ref:path}", summary="The lineage graph around an artifact")
def get_lineage(
    request: Request,
    ref: str,
    hops: int = Query(3, ge=0, le=50),
    limit: int = Query(200, ge=1, le=5000),
    direction: str = "both",
) -> dict[str, Any]:
    """Nodes and edges `hops` task layers upstream and downstream, at most `limit` nodes."""
    return data.lineage_view(
        ref, metadata=metadata_of(request), hops=hops, limit=limit, direction=direction,
        readable=readable_runs(request),
    )  # fmt: skip


@router.get("/models", summary="The model registry: versions, stages and metrics")
def list_models(request: Request, name: str | None = None) -> dict[str, Any]:
    """Models by name, each with its versions newest first (stage, metrics, URI, the run that
    registered it) and the version in production."""
    return data.models_view(metadata=metadata_of(request), name=name)


class StageChange(BaseModel):
    """The stage to move a model version to: none, staging or production."""

    stage: str = Field(..., description="none, staging or production (any case)")


@router.post(
    "/models/{name:path}/versions/{version}/stage", summary="Move a model version to a stage"
)
def change_stage(request: Request, name: str, version: int, body: StageChange) -> dict[str, Any]:
    """`{"model", "demoted"}`: the version in its new stage, and the version that left
    production for it (to production only; at most one version of a name is there). A stage
    that does not exist is a 400, a model or version that does not exist a 404."""
    from headwater.api.models import promote_model

    return promote_model(name, version, body.stage, metadata=metadata_of(request)).to_json()


@router.get("/endpoints", summary="Model servers deployed by deploy_model, and their state")
def list_endpoints(request: Request) -> dict[str, Any]:
    """Each endpoint's name, state (running, stopped, exited, unreachable), URL, the models it
    serves and the run that deployed it; running ones first."""
    return data.endpoints_view(metadata=metadata_of(request))


@router.get("/compare", summary="Parameters and metrics of 2-10 runs side by side")
def compare(request: Request, runs: str = Query(..., description="comma-separated run ids")) -> Any:
    """Rows of parameters and metrics, each with `differs`."""
    ids = [r for r in runs.split(",") if r.strip()]
    return data.compare_view(ids, metadata=metadata_of(request))
