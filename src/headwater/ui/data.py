"""What the API and the pages show, built from `headwater.api` (no web framework here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater.api.artifacts import ArtifactInfo, get_artifact
from headwater.api.exports import artifact_roots
from headwater.api.lineage import lineage
from headwater.api.runs import RunDetails, RunInfo, get_run, list_runs
from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.logs import TAIL_BYTES, tail_lines
from headwater.ui.groups import ITERATIONS_SHOWN

__all__ = [
    "artifact_view",
    "compare_view",
    "endpoints_view",
    "lineage_view",
    "log_path",
    "log_tail",
    "models_view",
    "run_view",
    "runs_page",
    "steps_view",
    "trace_path",
    "trials_of",
]


def run_json(run: RunInfo) -> dict[str, Any]:
    """A run's JSON with `duration_s` (seconds, None while running)."""
    return {**run.to_json(), "duration_s": run.duration}


def runs_page(
    *,
    metadata: str | None,
    limit: int = 50,
    offset: int = 0,
    pipeline: str | None = None,
    state: str | None = None,
    q: str | None = None,
    experiment_id: str | None = None,
    recurring_run_id: str | None = None,
    namespaces: list[str] | None = None,
) -> dict[str, Any]:
    """A page of runs, newest first: `{"runs", "limit", "offset", "next_offset", "pipelines",
    "metrics", "columns"}`, of one experiment or recurring run when given, of `namespaces`
    when given.

    Each run has `duration_s`, `cached` (every task a cache hit), `executor` and `tasks` (see
    `headwater.ui.tables.task_summary`). `metrics` is every metric the page's runs logged,
    `columns` those shown by default (`headwater.ui.tables.metric_columns`).

    This is one store query of `limit + 1` rows (the extra one says whether a next page
    exists) and one of the page's task counts. `q` matches a run id prefix or part of the
    pipeline name or state, ignoring case, in that query.
    """
    from headwater.api._store import reading
    from headwater.ui.tables import metric_columns, task_summary

    if not 1 <= limit <= 500:
        raise InvalidArgumentError(f"limit must be from 1 to 500, got {limit}")
    with reading(metadata) as store:
        if store is None:
            found, counts = [], {}
        else:
            found = list_runs(
                pipeline=pipeline or None,
                state=state or None,
                limit=limit + 1,
                offset=offset,
                text=q,
                experiment_id=experiment_id or None,
                recurring_run_id=recurring_run_id or None,
                namespaces=namespaces,
                metadata=store,
            )
            counts = store.task_counts([r.run_id for r in found[:limit]])
    page = [
        {**run_json(r), **task_summary(counts.get(r.run_id), state=r.state)} for r in found[:limit]
    ]
    return {
        "runs": page,
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if len(found) > limit else None,
        **metric_columns(page),
    }


def run_view(
    run_id: str, *, metadata: str | None, iterations: int = ITERATIONS_SHOWN
) -> dict[str, Any]:
    """The run with its tasks (each with `duration_s` and artifact ids) and its graph, whose
    loops draw at most `iterations` iterations each (see `headwater.ui.graph.layout`)."""
    from headwater.api._store import reading
    from headwater.ui.graph import layout

    run = get_run(run_id, metadata=metadata)
    with reading(metadata) as store:
        ir = None if store is None else store.get_pipeline_ir(run.run_id)
        records = {} if store is None else {e.id: e for e in store.list_executions(run.run_id)}
    tasks = []
    for task in run.tasks:
        record = records.get(task.execution_id)
        tasks.append(
            {
                **task.to_json(),
                "duration_s": task.duration,
                "cache_key": record.cache_key if record else "",
                "iteration": record.iteration if record else "",
            }
        )
    dags = {t.name: r.parent_dag for t in run.tasks if (r := records.get(t.execution_id))}
    graph = layout(run, ir, parent_dags=dags, iterations=iterations)
    where = {n["name"]: n.get("group", "") for n in graph["nodes"]}
    folded = {t: n["name"] for n in graph["nodes"] if n["kind"] == "more" for t in n["tasks"]}
    for shown in tasks:
        # The group a task is drawn in, or (folded away) the "+K more" node standing for it.
        shown["group"] = where.get(shown["name"], "")
        shown["folded_into"] = folded.get(shown["name"])
    return {**run_json(run), "tasks": tasks, "graph": graph}


#: Charts of metrics over steps on one page; a run that logged more names lists the rest.
MAX_CHARTS = 24


def steps_view(run_ids: list[str], *, metadata: str | None) -> dict[str, Any]:
    """The runs' metrics over steps, as stored and grouped for drawing.

    Returns:
        `{"series": [StepSeries JSON], "charts": [{"name", "lines": [{"label", "run_id",
        "task", "points", "logged"}]}], "more": [names not charted]}`: a chart per metric
        name (at most `MAX_CHARTS`), a line per task, labelled by task for one run and by
        run and task for several.
    """
    from headwater.api.steps import get_step_metrics

    found = get_step_metrics(run_ids, metadata=metadata)
    several = len({s.run_id for s in found}) > 1
    charts: dict[str, list[dict[str, Any]]] = {}
    for s in found:
        label = f"{s.run_id[:8]} {s.task}" if several else s.task
        line = {"label": label, "run_id": s.run_id, "task": s.task}
        charts.setdefault(s.name, []).append(
            {**line, "points": [list(p) for p in s.points], "logged": s.logged}
        )
    names = sorted(charts)
    return {
        "series": [s.to_json() for s in found],
        "charts": [{"name": n, "lines": charts[n]} for n in names[:MAX_CHARTS]],
        "more": names[MAX_CHARTS:],
    }


def trials_of(run_id: str, *, metadata: str | None) -> dict[str, Any] | None:
    """The trials of a tuning run (see `headwater.ui.trials.trials_view`), or None."""
    from headwater.ui.trials import trials_view

    return trials_view(get_run(run_id, metadata=metadata))


def log_path(run_id: str, task: str, *, metadata: str | None) -> Path:
    """The log file of `task` in the run, resolved.

    The path comes from the store, so it is read only if it resolves (after `..` and
    symlinks) inside the runs folder (`$HEADWATER_HOME/runs`) or an artifact store the run
    wrote to (logs kept beside task outputs); anything else is answered as missing.

    Raises:
        NotFoundError: No such run or task, the task has no log file, or its path leads out
            of those folders.
    """
    from headwater import config
    from headwater.paths import resolve_inside

    run = get_run(run_id, metadata=metadata)
    for t in run.tasks:
        if t.name != task:
            continue
        if not t.log_path:
            raise NotFoundError(f"task {task!r} of run {run.run_id} has no log file")
        roots: list[str | Path] = [config.runs_dir(), run.pipeline_root, config.pipeline_root()]
        path = resolve_inside(t.log_path, roots)
        if path is None:
            raise NotFoundError(
                f"the log of task {task!r} of run {run.run_id} is not served: its path "
                f"{t.log_path!r} is outside the runs folder {str(config.runs_dir())!r} and "
                "the artifact store"
            )
        if not path.is_file():
            raise NotFoundError(f"task {task!r} of run {run.run_id} has no log file")
        return path
    names = ", ".join(t.name for t in run.tasks) or "none"
    raise NotFoundError(f"run {run.run_id} has no task {task!r} (tasks: {names})")


def log_tail(path: Path, lines: int) -> str:
    """The last `lines` lines of `path`, read from its end: at most `headwater.logs.TAIL_BYTES`
    of it, marked when that stopped short (a log of one long line shows that line's end)."""
    if lines < 1:
        raise InvalidArgumentError(f"tail must be at least 1, got {lines}")
    kept, short = tail_lines(path, lines)
    head = (
        f"[headwater: the last {TAIL_BYTES // 1024} KiB of this log; download it for the rest]\n"
        if short
        else ""
    )
    return head + "\n".join(kept) + ("\n" if kept else "")


def artifact_view(ref: str, *, metadata: str | None) -> dict[str, Any]:
    """The artifact's JSON plus `preview` (see `headwater.ui.previews.preview`) and `traces`:
    the profiler traces in it, or for an HTML page (a profile's summary) those its task wrote
    beside it, each `{"name", "size", "url", "artifact_id"}`."""
    from headwater.ui.previews import preview
    from headwater.ui.traces import find_traces

    art = get_artifact(ref, metadata=metadata)
    roots = artifact_roots(art, metadata)
    view = {**art.to_json(), "preview": preview(art, roots)}
    view["traces"] = [{**t, "artifact_id": art.id} for t in find_traces(art, roots)]
    if not view["traces"] and art.type == "system.HTML" and art.producer is not None:
        view["traces"] = _sibling_traces(art, metadata)
    if art.type == "system.Model":
        from headwater.api.models import list_models

        view["registry"] = [m.to_json() for m in list_models(metadata=metadata) if m.uri == art.uri]
    return view


def trace_path(artifact_id: int, name: str, *, metadata: str | None) -> Path:
    """The trace file `name` of the artifact, resolved inside it and its store.

    Raises:
        NotFoundError: No such artifact or trace, or the path leads out of the artifact.
    """
    from headwater.ui.traces import trace_file

    art = get_artifact(str(artifact_id), metadata=metadata)
    return trace_file(art, artifact_roots(art, metadata), name)


def _sibling_traces(art: ArtifactInfo, metadata: str | None) -> list[dict[str, Any]]:
    """Traces in the other outputs of the task that wrote `art`."""
    from headwater.ui.traces import find_traces

    if art.producer is None:
        return []
    run = get_run(art.producer.run_id, metadata=metadata)
    found: list[dict[str, Any]] = []
    for task in run.tasks:
        if task.execution_id != art.producer.execution_id:
            continue
        for uris in task.output_artifacts.values():
            for uri in uris:
                if uri != art.uri:
                    other = get_artifact(uri, metadata=metadata)
                    roots = artifact_roots(other, metadata)
                    found += [{**t, "artifact_id": other.id} for t in find_traces(other, roots)]
    return found


def lineage_view(
    ref: str,
    *,
    metadata: str | None,
    hops: int = 3,
    limit: int = 200,
    direction: str = "both",
    readable: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """The lineage graph `hops` task layers each way, cut to `limit` nodes (nearest first);
    with `readable` (a test of run ids), without the runs it refuses, their tasks, and the
    artifacts only those touched."""
    if not 1 <= limit <= 5000:
        raise InvalidArgumentError(f"limit must be from 1 to 5000, got {limit}")
    graph = lineage(ref, direction=direction, depth=hops, metadata=metadata).to_json()
    nodes = graph["nodes"] if readable is None else _readable_nodes(graph, readable)
    kept = nodes[:limit]
    ids = {n["id"] for n in kept}
    edges = [e for e in graph["edges"] if e["from"] in ids and e["to"] in ids]
    return {"nodes": kept, "edges": edges, "truncated": len(nodes) > limit}


def _readable_nodes(graph: dict[str, Any], readable: Callable[[str], bool]) -> list[Any]:
    """The lineage nodes a reader may see: runs it may read, their tasks, and the artifacts
    those tasks touched (the graph's first node, the one asked for, stays)."""
    hidden = {
        n["id"]
        for n in graph["nodes"]
        if (n.get("kind") == "run" and not readable(n["id"][2:]))
        or (n.get("kind") == "execution" and not readable(str(n.get("run_id", ""))))
    }
    seen = {e["from"] for e in graph["edges"] if e["to"] not in hidden and e["from"] not in hidden}
    seen |= {e["to"] for e in graph["edges"] if e["to"] not in hidden and e["from"] not in hidden}
    first = graph["nodes"][0]["id"] if graph["nodes"] else None
    return [
        n
        for n in graph["nodes"]
        if n["id"] not in hidden
        and (n.get("kind") != "artifact" or n["id"] in seen or n["id"] == first)
    ]


def compare_view(run_ids: list[str], *, metadata: str | None) -> dict[str, Any]:
    """Parameters and metrics of 2-10 runs side by side; `differs` marks rows that vary;
    `steps`: their metrics over steps (`steps_view`), a line per run and task."""
    if not 2 <= len(run_ids) <= 10:
        raise InvalidArgumentError(f"compare takes 2 to 10 runs, got {len(run_ids)}")
    runs = [get_run(r, metadata=metadata) for r in run_ids]

    def table(pick: Any) -> list[dict[str, Any]]:
        keys = sorted({k for r in runs for k in pick(r)})
        rows = []
        for key in keys:
            values = [pick(r).get(key) for r in runs]
            rows.append({"name": key, "values": values, "differs": len(set(map(repr, values))) > 1})
        return rows

    return {
        "runs": [run_json(r) for r in runs],
        "parameters": table(lambda r: r.parameters),
        "metrics": table(lambda r: r.metrics),
        "roc": _roc_curves(runs, metadata),
        "steps": steps_view([r.run_id for r in runs], metadata=metadata),
    }


def _roc_curves(runs: list[RunDetails], metadata: str | None) -> list[dict[str, Any]]:
    """The ROC points of every ClassificationMetrics artifact the runs' tasks wrote."""
    from headwater.ui.previews import classification

    curves = []
    for run in runs:
        for task in run.tasks:
            for slot, uris in sorted(task.output_artifacts.items()):
                for uri in uris:
                    art = get_artifact(uri, metadata=metadata)
                    if art.type != "system.ClassificationMetrics":
                        continue
                    points = classification(art.metadata)["roc"]
                    if points:
                        name = f"{run.run_id[:8]} {task.name}/{slot}"
                        curves.append({"name": name, "artifact_id": art.id, "points": points})
    return curves


def models_view(*, metadata: str | None, name: str | None = None) -> dict[str, Any]:
    """The registry by model, and the endpoints serving it:
    `{"models": [{"name", "production", "metrics", "versions"}], "endpoints": [...]}`.

    Models are in name order, each with its versions newest first (each naming the endpoints
    that serve it), the version in production (or None) and the names of the metrics its
    versions logged. Endpoints are `endpoints_view`'s, only those serving `name` if given.
    """
    from headwater.api.models import list_models

    endpoints = endpoints_view(metadata=metadata)["endpoints"]
    if name:
        endpoints = [e for e in endpoints if any(m["model"] == name for m in e["models"])]
    serving: dict[str, list[str]] = {}
    for endpoint in endpoints:
        if endpoint["state"] == "running":
            for model in endpoint["models"]:
                if model["registered"]:
                    serving.setdefault(model["registered"], []).append(endpoint["name"])
    by_name: dict[str, list[dict[str, Any]]] = {}
    for model in list_models(name=name or None, metadata=metadata):
        entry = model.to_json()
        entry["endpoints"] = serving.get(f"{model.name}:{model.version}", [])
        by_name.setdefault(model.name, []).append(entry)
    models = []
    for key in sorted(by_name):
        versions = by_name[key]
        live = [v["version"] for v in versions if v["stage"] == "production"]
        models.append(
            {
                "name": key,
                "production": live[0] if live else None,
                "metrics": sorted({m for v in versions for m in v["metrics"]}),
                "versions": versions,
            }
        )
    return {"models": models, "endpoints": endpoints}


def endpoints_view(*, metadata: str | None) -> dict[str, Any]:
    """The endpoints `deploy_model` started, running first, then by name:
    `{"endpoints": [{"name", "state", "url", "models", "run_id", "updated_at", ...}]}`, each
    model with `model` (its registry name) and `version` added."""
    from headwater.endpoints import list_endpoints

    found = []
    for endpoint in list_endpoints(metadata=metadata):
        entry = endpoint.to_json()
        for model in entry["models"]:
            registered = str(model.get("registered") or "")
            model["model"] = registered.rpartition(":")[0] if registered else None
        found.append(entry)
    found.sort(key=lambda e: (e["state"] != "running", e["name"]))
    return {"endpoints": found}
