"""`headwater runs|artifacts|lineage|cache`: reading (and pruning) what the metadata store holds."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import datetime, timezone
from typing import Any

from headwater.errors import NotFoundError
from headwater.metadata.base import (
    ArtifactRecord,
    Direction,
    EventRecord,
    ExecutionRecord,
    MetadataStore,
    RunRecord,
)


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register the inspection commands on the CLI's subparsers."""
    runs = sub.add_parser("runs", help="list, show and delete runs")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, parser_class=parser_class)
    ls = runs_sub.add_parser("list", help="runs, newest first, with their metrics")
    ls.add_argument("--pipeline", help="only runs of this pipeline")
    ls.add_argument("--state", help="only runs in this state (SUCCEEDED, FAILED, ...)")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    show = runs_sub.add_parser("show", help="one run's tasks, inputs, outputs and logs")
    show.add_argument("run_id", help="a run id (a unique prefix is enough)")
    show.add_argument("--json", action="store_true")
    delete = runs_sub.add_parser("delete", help="delete a run and the artifacts only it uses")
    delete.add_argument("run_id")

    arts = sub.add_parser("artifacts", help="inspect artifacts")
    arts_sub = arts.add_subparsers(
        dest="artifacts_command", required=True, parser_class=parser_class
    )
    art_show = arts_sub.add_parser("show", help="one artifact by URI or id")
    art_show.add_argument("ref", metavar="URI|ID")
    art_show.add_argument("--json", action="store_true")

    lineage = sub.add_parser("lineage", help="what made an artifact, and what it made")
    lineage.add_argument("ref", metavar="URI|ID", help="an artifact URI or id, or e:<execution id>")
    way = lineage.add_mutually_exclusive_group()
    way.add_argument("--upstream", action="store_true", help="only what led to it")
    way.add_argument("--downstream", action="store_true", help="only what came from it")
    lineage.add_argument("--depth", type=int, default=10, help="execution hops (default 10)")
    lineage.add_argument("--json", action="store_true", help="print {nodes, edges}")

    cache = sub.add_parser("cache", help="manage the task cache")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True, parser_class=parser_class)
    cache_sub.add_parser("clear", help="forget every cached task result")


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return (
        datetime.fromtimestamp(ts, timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def _run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "pipeline": run.pipeline,
        "state": run.state,
        "created_at": _when(run.created_at),
        "finished_at": _when(run.finished_at),
        "metrics": run.metrics,
    }


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def cmd_runs(args: argparse.Namespace, store: MetadataStore) -> int:
    """`headwater runs list|show|delete`."""
    if args.runs_command == "list":
        runs = store.list_runs(pipeline=args.pipeline, state=args.state, limit=args.limit)
        if args.json:
            print(json.dumps([_run_json(r) for r in runs]))
            return 0
        if not runs:
            print("no runs", file=sys.stderr)
            return 0
        names = sorted({m for r in runs for m in r.metrics})[:6]
        rows = [["RUN ID", "PIPELINE", "STATE", "CREATED", "DURATION", *names]]
        for r in runs:
            took = f"{r.finished_at - r.created_at:.1f}s" if r.finished_at else ""
            metrics = [f"{r.metrics[m]:.4g}" if m in r.metrics else "" for m in names]
            rows.append([r.run_id, r.pipeline, r.state, _when(r.created_at), took, *metrics])
        print(_table(rows))
        return 0
    run = _get_run(store, args.run_id)
    if args.runs_command == "delete":
        return _delete(store, run)
    executions = store.list_executions(run.run_id)
    events = store.artifacts_of_many([e.id for e in executions if e.id is not None])
    tasks = [_execution_json(e, events.get(e.id or 0, [])) for e in executions]
    if args.json:
        print(json.dumps({**_run_json(run), "parameters": run.parameters, "outputs": run.outputs,
                          "error": run.error, "pipeline_root": run.pipeline_root,
                          "tasks": tasks}, default=str))  # fmt: skip
        return 0
    print(f"run       {run.run_id}\npipeline  {run.pipeline}\nstate     {run.state}")
    print(f"created   {_when(run.created_at)}\nparams    {json.dumps(run.parameters)}")
    if run.outputs:
        print(f"outputs   {json.dumps(run.outputs, default=str)}")
    if run.error:
        print(f"error     {run.error.get('task')}: {run.error.get('message')}")
    rows = [["TASK", "STATE", "DURATION", "CACHED", "INPUTS", "OUTPUTS", "LOG"]]
    for t in tasks:
        outputs = dict(t["outputs"])
        outputs.update({k: v for k, v in t["artifacts"]["outputs"].items()})
        rows.append([t["name"], t["state"], t["duration"], "yes" if t["cached"] else "",
                     _short(t["inputs"]), _short(outputs), t["log_path"]])  # fmt: skip
    print(_table(rows))
    return 0


def _short(value: dict[str, Any], width: int = 48) -> str:
    text = json.dumps(value, default=str, separators=(",", ":")) if value else ""
    return text if len(text) <= width else text[: width - 3] + "..."


def _execution_json(
    e: ExecutionRecord, events: list[tuple[EventRecord, ArtifactRecord]]
) -> dict[str, Any]:
    arts: dict[str, dict[str, list[str]]] = {"inputs": {}, "outputs": {}}
    for event, art in events:
        side = "inputs" if event.kind == "INPUT" else "outputs"
        arts[side].setdefault(event.slot, []).append(art.uri)
    took = ""
    if e.started_at and e.finished_at:
        took = f"{e.finished_at - e.started_at:.2f}s"
    return {
        "name": e.task,
        "state": e.state,
        "cached": e.state == "CACHED",
        "cached_from": e.cached_from,
        "execution_id": e.id,
        "started_at": _when(e.started_at),
        "finished_at": _when(e.finished_at),
        "duration": took,
        "inputs": e.inputs,
        "outputs": e.outputs,
        "artifacts": arts,
        "log_path": e.log_path,
        "error": e.error,
        "attempts": e.attempts,
    }


def _get_run(store: MetadataStore, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id!r}: see `headwater runs list`")
    return run


def _delete(store: MetadataStore, run: RunRecord) -> int:
    from headwater import config
    from headwater.artifacts import store_for

    if run.state == "RUNNING":
        from headwater.errors import UserError

        raise UserError(f"run {run.run_id} is still running: wait for it to finish first")
    uris = store.delete_run(run.run_id)
    artifacts = store_for(run.pipeline_root) if run.pipeline_root else None
    for uri in uris:
        if artifacts is not None and uri.startswith(artifacts.root):
            artifacts.delete(uri)
    shutil.rmtree(config.runs_dir() / run.run_id, ignore_errors=True)
    print(
        f"deleted run {run.run_id} and {len(uris)} artifact(s) no other run uses", file=sys.stderr
    )
    return 0


def cmd_artifacts(args: argparse.Namespace, store: MetadataStore) -> int:
    """`headwater artifacts show`."""
    ref: int | str = int(args.ref) if args.ref.isdigit() else args.ref
    art = store.get_artifact(ref)
    if art is None:
        raise NotFoundError(f"no artifact {args.ref!r}: pass an artifact URI or numeric id")
    producer = store.get_execution(art.producer) if art.producer is not None else None
    record = {
        "id": art.id,
        "uri": art.uri,
        "name": art.name,
        "type": art.schema_title,
        "digest": art.digest,
        "size": art.size,
        "metadata": art.metadata,
        "created_at": _when(art.created_at),
        "producer": None
        if producer is None
        else {"execution_id": producer.id, "task": producer.task, "run_id": producer.run_id},
    }
    if args.json:
        print(json.dumps(record, default=str))
        return 0
    for key, value in record.items():
        shown = json.dumps(value, default=str) if isinstance(value, dict) else value
        print(f"{key:<11}{'' if shown is None else shown}")
    return 0


def cmd_lineage(args: argparse.Namespace, store: MetadataStore) -> int:
    """`headwater lineage`."""
    direction: Direction = (
        "upstream" if args.upstream else "downstream" if args.downstream else "both"
    )
    ref: int | str = int(args.ref) if args.ref.isdigit() else args.ref
    graph = store.lineage(ref, direction=direction, depth=args.depth)
    if args.json:
        print(json.dumps({"nodes": graph.nodes, "edges": graph.edges}, default=str))
        return 0
    labels = {n["id"]: _label(n) for n in graph.nodes}
    for node in graph.nodes:
        print(labels[node["id"]])
        for edge in graph.edges:
            if edge["from"] == node["id"]:
                slot = f" [{edge['slot']}]" if edge.get("slot") else ""
                print(f"    --{edge['kind'].lower()}{slot}--> {labels.get(edge['to'], edge['to'])}")
    return 0


def _label(node: dict[str, Any]) -> str:
    kind = node.get("kind")
    if kind == "artifact":
        return f"artifact {node['id']} {node.get('schema_title', '')} {node.get('uri', '')}"
    if kind == "execution":
        state, run = node.get("state", ""), node.get("run_id", "")
        return f"task {node['id']} {node.get('task', '')} ({state}) run {run}"
    return f"run {node['id']} {node.get('pipeline', '')} ({node.get('state', '')})"


def cmd_cache(args: argparse.Namespace, store: MetadataStore) -> int:
    """`headwater cache clear`."""
    cleared = store.clear_cache()
    print(f"cleared {cleared} cached task result(s)", file=sys.stderr)
    return 0
