"""A run's task graph, laid out top-down in layers (longest path from the sources).

The nodes are the run's plan (`headwater.ui.plan`): the tasks it recorded and, while it
runs, those its IR will still start (`PENDING`; `NOT_RUN` once the run is over).
Edges come from two places: a task that read an artifact another task of the run wrote, and
the IR's `dependentTasks` (which also covers parameter-only and `.after()` dependencies).
Loop iterations (`train[0]`) and nested-pipeline tasks (`inner.train`) are matched to their
IR task by base name; `headwater.ui.groups` puts them in boxes and folds long loops. Nodes
in a layer are ordered by the mean position of their parents (one barycentre pass), which
keeps the usual fan-out/fan-in pipelines free of crossings.
"""

from __future__ import annotations

from typing import Any

from headwater.api.runs import RunDetails
from headwater.metadata.base import ENDED_RUN_STATES
from headwater.spec.ir import is_control_flow_task
from headwater.task import split_iterations
from headwater.ui.groups import ITERATIONS_SHOWN, collapse_defaults, group_tasks
from headwater.ui.plan import plan_run

__all__ = ["NODE_H", "NODE_W", "layout", "lineage_layout", "place"]

NODE_W, NODE_H = 180, 44
GAP_X, GAP_Y = 30, 56


def edges_of(
    run: RunDetails, ir: dict[str, Any] | None, names: list[str] | None = None
) -> list[tuple[str, str]]:
    """(upstream task, downstream task) pairs, without duplicates or self-loops, between
    `names` (default: the run's recorded tasks)."""
    writer: dict[str, str] = {}
    for task in run.tasks:
        for uris in task.output_artifacts.values():
            for uri in uris:
                writer.setdefault(uri, task.name)
    found: set[tuple[str, str]] = set()
    for task in run.tasks:
        for uris in task.input_artifacts.values():
            for uri in uris:
                source = writer.get(uri)
                if source is not None and source != task.name:
                    found.add((source, task.name))
    executed: dict[str, list[str]] = {}
    for name in [t.name for t in run.tasks] if names is None else names:
        executed.setdefault(split_iterations(name)[0], []).append(name)
    for up, down in _ir_edges(ir):
        for source in executed.get(up, []):
            for target in executed.get(down, []):
                if source != target and _same_iteration(source, target):
                    found.add((source, target))
    return sorted(found)


def _same_iteration(source: str, target: str) -> bool:
    """True if one task's loop indices lead the other's (`add[1]` and `sum[1][0]`, or a
    task outside the loop), so iterations are not cross-linked."""
    a, b = split_iterations(source)[1], split_iterations(target)[1]
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _ir_edges(ir: dict[str, Any] | None) -> set[tuple[str, str]]:
    """(upstream, downstream) executor-task names without loop indices, from the IR's
    `dependentTasks`: a dependency on a loop or nested pipeline links its last tasks to the
    first tasks of the dependent one. Nested-pipeline tasks are named `inner.task`."""
    if not ir:
        return set()
    components = ir.get("components", {})
    edges: set[tuple[str, str]] = set()

    def walk(dag: dict[str, Any], prefix: str) -> tuple[set[str], set[str]]:
        """The (first, last) executor tasks of `dag`, recording the edges inside it."""
        tasks = {k: v for k, v in (dag.get("tasks") or {}).items() if isinstance(v, dict)}
        ends: dict[str, tuple[set[str], set[str]]] = {}
        for name, spec in tasks.items():
            component = components.get(spec.get("componentRef", {}).get("name", ""), {})
            if isinstance(component, dict) and "dag" in component:
                # Loops, conditions and exit handlers add nothing to their tasks' names.
                inner = prefix if is_control_flow_task(name) else f"{prefix}{name}."
                ends[name] = walk(component["dag"], inner)
            else:
                ends[name] = ({prefix + name}, {prefix + name})
        needed: set[str] = set()
        for name, spec in tasks.items():
            for dep in spec.get("dependentTasks") or []:
                if dep in ends:
                    needed.add(dep)
                    edges.update((u, d) for u in ends[dep][1] for d in ends[name][0])
        first: set[str] = set()
        last: set[str] = set()
        for name, spec in tasks.items():
            if not any(d in ends for d in spec.get("dependentTasks") or []):
                first |= ends[name][0]
            if name not in needed:
                last |= ends[name][1]
        return first, last

    walk(ir.get("root", {}).get("dag", {}), "")
    return edges


def layout(
    run: RunDetails,
    ir: dict[str, Any] | None,
    *,
    parent_dags: dict[str, str] | None = None,
    iterations: int = ITERATIONS_SHOWN,
) -> dict[str, Any]:
    """`{"nodes": [{name, state, group, kind, duration_s, x, y, layer}], "edges": [{from, to,
    points}], "groups": [{id, label, parent, kind, nodes, states, state, collapsed}],
    "width", "height"}` with coordinates in pixels, sources on top.

    Nested pipelines, loops, loop iterations and conditions are groups (see
    `headwater.ui.groups`); a loop draws at most `iterations` of its iterations, and one
    "+K more" node (`kind` "more", with the `tasks` it stands for and their `states`) for
    the rest. Tasks of the plan not recorded yet are nodes too, `planned`.
    """
    recorded = {t.name: {"inputs": t.inputs, "outputs": t.outputs} for t in run.tasks}
    plan = plan_run(ir, recorded, run.parameters)
    waiting = "NOT_RUN" if run.state in ENDED_RUN_STATES else "PENDING"
    dags = parent_dags or {}
    tasks = [(t.name, t.state, dags.get(t.name, "")) for t in run.tasks]
    tasks += [(name, waiting, "") for name in plan.tasks if name not in recorded]
    states = {name: state for name, state, _ in tasks}
    durations = {t.name: t.duration for t in run.tasks}
    grouping = group_tasks(tasks, plan, limit=iterations)
    more = {m["name"]: m for m in grouping.more}
    pairs = sorted(
        {
            (grouping.node(a), grouping.node(b))
            for a, b in edges_of(run, ir, list(states))
            if a in states and b in states and grouping.node(a) != grouping.node(b)
        }
    )
    names = [name for name, _, _ in tasks if name in grouping.group_of]
    placed = place(names + list(more), pairs)
    for node in placed["nodes"]:
        name = node["name"]
        if name in more:
            node.update(more[name])
        else:
            took = durations.get(name)
            node.update(
                state=states[name], group=grouping.group_of[name], kind="task",
                planned=name not in recorded, iteration=name[len(split_iterations(name)[0]) :],
                duration_s=None if took is None else round(took, 3),
            )  # fmt: skip
    placed["groups"] = grouping.groups
    collapse_defaults(grouping.groups, placed["nodes"])
    return placed


def lineage_layout(graph: dict[str, Any]) -> dict[str, Any]:
    """A lineage graph (`headwater.api.lineage`) laid out the same way, data flowing down:
    artifacts and task executions as nodes (runs are named on their executions)."""
    kept = [n for n in graph["nodes"] if n["kind"] in ("artifact", "execution")]
    ids = {n["id"] for n in kept}
    pairs = [
        (e["from"], e["to"])
        for e in graph["edges"]
        if e["from"] in ids and e["to"] in ids and e["kind"] in ("INPUT", "OUTPUT")
    ]
    placed = place([n["id"] for n in kept], sorted(set(pairs)))
    info = {n["id"]: n for n in kept}
    for node in placed["nodes"]:
        node["node"] = info[node["name"]]
    return placed


def place(names: list[str], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Layered layout of `names` with edges `pairs`: each node one layer below its deepest
    parent (cycles are cut where met), ordered in its layer by its parents' mean column."""
    parents: dict[str, list[str]] = {n: [] for n in names}
    for a, b in pairs:
        parents[b].append(a)
    layer: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in layer:
            ups = [p for p in parents[name] if p not in seen]
            layer[name] = 1 + max((depth(p, seen | {name}) for p in ups), default=-1)
        return layer[name]

    for name in names:
        depth(name)
    rows: dict[int, list[str]] = {}
    for name in sorted(names, key=lambda n: (layer[n], n)):
        rows.setdefault(layer[name], []).append(name)
    column: dict[str, float] = {}
    for index in sorted(rows):
        row = rows[index]
        if index:
            row.sort(
                key=lambda n: (
                    sum(column[p] for p in parents[n]) / len(parents[n]) if parents[n] else 1e9,
                    n,
                )
            )
        for i, name in enumerate(row):
            column[name] = i
    widest = max((len(r) for r in rows.values()), default=0)
    width = max(widest * (NODE_W + GAP_X) + GAP_X, NODE_W + 2 * GAP_X)
    pos: dict[str, tuple[float, float]] = {}
    nodes = []
    for index, row in rows.items():
        span = len(row) * (NODE_W + GAP_X) - GAP_X
        left = (width - span) / 2
        for i, name in enumerate(row):
            x, y = left + i * (NODE_W + GAP_X), GAP_Y / 2 + index * (NODE_H + GAP_Y)
            pos[name] = (x, y)
            nodes.append({"name": name, "x": x, "y": y, "layer": index})
    edges = [
        {
            "from": a,
            "to": b,
            "points": [
                [pos[a][0] + NODE_W / 2, pos[a][1] + NODE_H],
                [pos[b][0] + NODE_W / 2, pos[b][1]],
            ],
        }
        for a, b in pairs
    ]
    height = (max(rows, default=0) + 1) * (NODE_H + GAP_Y) + GAP_Y / 2 if rows else NODE_H
    return {"nodes": nodes, "edges": edges, "width": width, "height": height}
