"""`headwater runs|artifacts|lineage|cache`: printing what the Python API returns.

Each command calls one function of `headwater.api` and prints its result: as a table or
lines, or with `--json` as the result's `to_json()` on one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from headwater.api import iso_time
from headwater.cli.loops import FOLD_OVER, FoldedLoop, fold_loops
from headwater.config import home_command


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register the inspection commands on the CLI's subparsers."""
    runs = sub.add_parser("runs", help="list, show and delete runs")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, parser_class=parser_class)
    ls = runs_sub.add_parser("list", help="runs, newest first, with their metrics")
    ls.add_argument("--pipeline", help="only runs of this pipeline")
    ls.add_argument(
        "--state", help="only runs in this state (RUNNING, SUCCEEDED, FAILED, INTERRUPTED)"
    )
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    ls.add_argument("--offset", type=int, default=0, help="skip this many of the newest")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    show = runs_sub.add_parser("show", help="one run's tasks, inputs, outputs and logs")
    show.add_argument("run_id", help="a run id (a unique prefix is enough)")
    show.add_argument("--json", action="store_true")
    show.add_argument(
        "--all",
        action="store_true",
        help=f"list every task (a loop of over {FOLD_OVER} iterations is otherwise one line, "
        "after its failed ones)",
    )
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
    lineage.add_argument(
        "ref",
        metavar="URI|ID|MODEL",
        help="an artifact URI or id, e:<execution id>, or a registered model (NAME:VERSION, "
        "NAME@STAGE, or NAME: its production version, else its newest)",
    )
    way = lineage.add_mutually_exclusive_group()
    way.add_argument("--upstream", action="store_true", help="only what led to it")
    way.add_argument("--downstream", action="store_true", help="only what came from it")
    lineage.add_argument("--depth", type=int, default=10, help="execution hops (default 10)")
    lineage.add_argument("--json", action="store_true", help="print {nodes, edges}")

    cache = sub.add_parser("cache", help="manage the task cache")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True, parser_class=parser_class)
    cache_sub.add_parser("clear", help="forget every cached task result")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _short(value: dict[str, Any], width: int = 48) -> str:
    text = json.dumps(value, default=str, separators=(",", ":")) if value else ""
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_runs(args: argparse.Namespace) -> int:
    """`headwater runs list|show|delete`."""
    from headwater.api import runs as api

    if args.runs_command == "list":
        found = api.list_runs(
            pipeline=args.pipeline,
            state=args.state,
            limit=args.limit,
            offset=args.offset,
            metadata=args.metadata_url,
        )
        if args.json:
            print(json.dumps([r.to_json() for r in found], default=str))
            return 0
        if not found:
            print("no runs", file=sys.stderr)
            return 0
        names = sorted({m for r in found for m in r.metrics})[:6]
        # A server's runs have names and experiments; `headwater run`'s have neither.
        filed = any(r.display_name or r.experiment for r in found)
        extra = ["NAME", "EXPERIMENT"] if filed else []
        rows = [["RUN ID", "PIPELINE", "STATE", *extra, "CREATED", "DURATION", *names]]
        for r in found:
            took = "" if r.duration is None else f"{r.duration:.1f}s"
            metrics = [f"{r.metrics[m]:.4g}" if m in r.metrics else "" for m in names]
            where = [r.display_name, r.experiment] if filed else []
            rows.append(
                [r.run_id, r.pipeline, r.state, *where, iso_time(r.created_at), took, *metrics]
            )
        print(_table(rows))
        return 0
    if args.runs_command == "delete":
        deleted = api.delete_run(args.run_id, metadata=args.metadata_url)
        print(
            f"deleted run {deleted.run_id} and {len(deleted.artifact_uris)} artifact(s) no "
            "other run uses",
            file=sys.stderr,
        )
        return 0
    run = api.get_run(args.run_id, metadata=args.metadata_url)
    if args.json:
        print(json.dumps(run.to_json(), default=str))
        return 0
    facts: list[tuple[str, Any]] = [
        ("run", run.run_id),
        ("name", run.display_name),
        ("pipeline", run.pipeline),
        ("state", run.state),
        ("experiment", run.experiment),
        ("namespace", run.namespace),
        ("recurring", run.recurring_run_id),
        ("created", iso_time(run.created_at)),
        ("params", json.dumps(run.parameters)),
        ("outputs", json.dumps(run.outputs, default=str) if run.outputs else ""),
    ]
    if run.error:
        task = run.error.get("task")
        facts.append(
            ("error", f"{task}: {run.error.get('message')}" if task else run.error.get("message"))
        )
    for label, value in facts:
        if value:
            print(f"{label:<10} {value}")
    # Paths under the run's own folders are shown relative to them, whole otherwise (a cached
    # task's artifacts are another run's): what differs from task to task is never cut off.
    art_root = f"{run.pipeline_root.rstrip('/')}/{run.pipeline}/{run.run_id}/"
    logs = [t.log_path for t in run.tasks if t.log_path]
    log_root = os.path.commonpath(logs) + os.sep if len(logs) > 1 else ""
    if len(logs) == 1:
        log_root = os.path.dirname(os.path.dirname(logs[0])) + os.sep
    uris = [u for t in run.tasks for a in (t.input_artifacts, t.output_artifacts)
            for us in a.values() for u in us]  # fmt: skip
    if any(u.startswith(art_root) for u in uris):
        print(f"{'artifacts':<10} {art_root}  (the paths below are relative to it)")
    else:
        art_root = "\0"  # nothing is under it: every URI shown whole
    if log_root:
        print(f"{'logs':<10} {log_root}")
    rows = [["TASK", "STATE", "DURATION", "CACHED", "INPUTS", "OUTPUTS", "LOG"]]
    shown, folded = fold_loops(run.tasks, every=args.all)
    for t in shown:
        if isinstance(t, FoldedLoop):
            rows.append([t.name, t.summary(), t.duration(), "", "", "", ""])
            continue
        inputs = {**user_names(t.inputs), **_paths(t.input_artifacts, art_root)}
        outputs = {**t.outputs, **_paths(t.output_artifacts, art_root)}
        took = "" if t.duration is None else f"{t.duration:.2f}s"
        log = (
            t.log_path[len(log_root) :]
            if log_root and t.log_path.startswith(log_root)
            else t.log_path
        )
        rows.append([t.name, t.state, took, "yes" if t.cached else "",
                     _assignments(inputs), _assignments(outputs), log])  # fmt: skip
    print(_table(rows))
    if folded:
        print(
            f"(each loop of over {FOLD_OVER} iterations is one line, after its failed ones; "
            f"every task: {home_command('runs', 'show', run.run_id, '--all')})"
        )
    return 0


#: The prefix KFP's compiler gives the inputs it adds to a task (a pipeline parameter that
#: `set_cpu_limit` uses, a loop item): `pipelinechannel--cpus` is the user's `cpus`.
CHANNEL_PREFIX = "pipelinechannel--"


def user_names(values: dict[str, Any]) -> dict[str, Any]:
    """`values` under the names the user wrote: `pipelinechannel--x` shown as `x`, and left
    out where the task has `x` already with the same value."""
    shown: dict[str, Any] = {}
    for key, value in values.items():
        name = key.removeprefix(CHANNEL_PREFIX)
        if name != key and name in values:
            if values[name] == value:
                continue
            name = key
        shown[name] = value
    return shown


class _Path(str):
    """An artifact path or URI: shown whole and unquoted."""


def _paths(artifacts: dict[str, list[str]], root: str) -> dict[str, Any]:
    """Artifact URIs by input or output name, relative to `root` where they are under it."""
    return {
        name: _Path(",".join(u[len(root) :] if u.startswith(root) else u for u in uris))
        for name, uris in user_names(artifacts).items()
    }


def _assignments(values: dict[str, Any], width: int = 40) -> str:
    """`name=value ...`: values as compact JSON, each cut to `width`; paths whole."""
    parts = []
    for name, value in values.items():
        if isinstance(value, _Path):
            text = str(value)
        else:
            text = json.dumps(value, default=str, separators=(",", ":"))
            text = text if len(text) <= width else text[: width - 3] + "..."
        parts.append(f"{name}={text}")
    return " ".join(parts)


def cmd_artifacts(args: argparse.Namespace) -> int:
    """`headwater artifacts show`."""
    from headwater.api.artifacts import get_artifact

    record = get_artifact(args.ref, metadata=args.metadata_url).to_json()
    if args.json:
        print(json.dumps(record, default=str))
        return 0
    for key, value in record.items():
        shown = json.dumps(value, default=str) if isinstance(value, dict) else value
        print(f"{key:<11}{'' if shown is None else shown}")
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    """`headwater lineage`."""
    from headwater.api.lineage import lineage

    direction = "upstream" if args.upstream else "downstream" if args.downstream else "both"
    graph = lineage(args.ref, direction=direction, depth=args.depth, metadata=args.metadata_url)
    if args.json:
        print(json.dumps(graph.to_json(), default=str))
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
        label = f"artifact {node['id']} {node.get('schema_title', '')} {node.get('uri', '')}"
        for m in node.get("models", []):
            label += f" [model {m['name']} v{m['version']}, {m['stage']}]"
        return label
    if kind == "execution":
        state, run = node.get("state", ""), node.get("run_id", "")
        label = f"task {node['id']} {node.get('task', '')} ({state}) run {run}"
        params = _assignments(user_names(node.get("inputs") or {}))
        return f"{label} params {params}" if params else label
    return f"run {node['id']} {node.get('pipeline', '')} ({node.get('state', '')})"


def cmd_cache(args: argparse.Namespace) -> int:
    """`headwater cache clear`."""
    from headwater.api.cache import clear_cache

    cleared = clear_cache(metadata=args.metadata_url)
    print(f"cleared {cleared} cached task result(s)", file=sys.stderr)
    return 0
