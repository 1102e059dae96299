"""The boxes of a run's graph: nested pipelines, ParallelFor loops, their iterations, conditions.

Where a task sits comes from the run's plan (`headwater.ui.plan`, read from the IR); a task
the plan does not explain (no IR stored, say) falls back to its record's `parent_dag`, the
nested pipelines it ran in. A loop is labelled with its number of iterations
(`for-loop-2 (3 iterations)`) and holds one group per iteration, labelled with its item.

A loop with many iterations would make the graph unreadable, so each loop shows at most
`limit` of them: failed ones first, then running ones, then the rest in order. The others
fold into one "+K more" node in the loop's box, which stands in for their tasks in edges
and lists them (with their states) for the task panel.

Each group also says how many nodes it holds, their states, and whether the page draws it
collapsed at first (`collapse_defaults`): one that holds more than `COLLAPSE_OVER` nodes
is, unless the graph would then show fewer than `MIN_SHOWN` nodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from headwater.ui.plan import Plan

__all__ = ["COLLAPSE_OVER", "ITERATIONS_SHOWN", "Grouping", "collapse_defaults", "group_tasks"]

#: Iterations of one loop drawn by default; `?iterations=N` asks for more.
ITERATIONS_SHOWN = 5
#: A group holding more nodes than this is drawn collapsed at first (a click opens it).
COLLAPSE_OVER = 8
#: ... unless the graph would then show fewer nodes than this: the largest opens instead.
MIN_SHOWN = 4
#: Worst first: the colour of a "+K more" node is that of its worst hidden task.
SEVERITY = ("FAILED", "INTERRUPTED", "RUNNING", "PENDING", "CANCELED", "SUCCEEDED", "CACHED",
            "SKIPPED", "NOT_RUN")  # fmt: skip
_MORE = ":more"


@dataclass
class Grouping:
    """What `group_tasks` decided: each shown task's group, the groups, the "+K more" nodes
    and which hidden task each of those stands for."""

    group_of: dict[str, str] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    more: list[dict[str, Any]] = field(default_factory=list)
    folded: dict[str, str] = field(default_factory=dict)

    def node(self, task: str) -> str:
        """The node drawn for `task`: itself, or the "+K more" node it is folded into."""
        return self.folded.get(task, task)


def worst(states: Counter[str]) -> str:
    """The state that colours a set of tasks: the worst of them."""
    return next((s for s in SEVERITY if states[s]), next(iter(states), "SKIPPED"))


def group_tasks(
    tasks: list[tuple[str, str, str]], plan: Plan, *, limit: int = ITERATIONS_SHOWN
) -> Grouping:
    """Place `tasks` ((name, state, parent_dag) in run order) in groups, folding iterations
    past `limit` per loop."""
    groups: dict[str, dict[str, Any]] = {}
    paths: dict[str, list[str]] = {}
    iterations: dict[str, dict[int, list[str]]] = {}
    for name, state, parent_dag in tasks:
        path = plan.tasks.get(name)
        if path is None:
            path, current = [], ""
            for part in parent_dag.split(".") if parent_dag else []:
                here = f"{current}.{part}" if current else part
                groups.setdefault(
                    here, {"id": here, "label": part, "parent": current, "kind": "pipeline"}
                )
                path.append(here)
                current = here
        for gid in path:
            group = groups.setdefault(gid, dict(plan.groups.get(gid) or {}))
            if group.get("kind") == "iteration":
                loop = iterations.setdefault(group["parent"], {})
                loop.setdefault(group["index"], []).append(state)
        paths[name] = path
    hidden = _hidden_iterations(iterations, limit)
    return _fold(tasks, groups, paths, iterations, hidden)


def _hidden_iterations(iterations: dict[str, dict[int, list[str]]], limit: int) -> set[str]:
    """The iteration group ids not drawn: past `limit` per loop, failed and running first."""

    def rank(states: list[str]) -> int:
        if any(s in ("FAILED", "INTERRUPTED") for s in states):
            return 0
        return 1 if any(s in ("RUNNING", "PENDING") for s in states) else 2

    hidden: set[str] = set()
    for loop, by_index in iterations.items():
        ordered = sorted(by_index, key=lambda i: (rank(by_index[i]), i))
        hidden.update(f"{loop}[{i}]" for i in ordered[limit:])
    return hidden


def _fold(
    tasks: list[tuple[str, str, str]],
    groups: dict[str, dict[str, Any]],
    paths: dict[str, list[str]],
    iterations: dict[str, dict[int, list[str]]],
    hidden: set[str],
) -> Grouping:
    out = Grouping()
    states: dict[str, Counter[str]] = {}
    folded_tasks: dict[str, list[str]] = {}
    drawn: set[str] = set()
    for name, state, _ in tasks:
        path = paths[name]
        cut = next((i for i, g in enumerate(path) if g in hidden), None)
        if cut is None:
            out.group_of[name] = path[-1] if path else ""
            drawn.update(path)
            continue
        loop = path[cut - 1]  # an iteration's parent is its loop
        more = loop + _MORE
        out.folded[name] = more
        states.setdefault(more, Counter())[state] += 1
        folded_tasks.setdefault(more, []).append(name)
        drawn.update(path[:cut])
    for gid in sorted(drawn):
        group = dict(groups[gid])
        if group["kind"] == "loop":
            count = group.get("iterations")
            if count is None and iterations.get(gid):
                count = len(iterations[gid])
            group["iterations"] = count
            group["label"] = f"{group['label']} ({_count_text(count)})"
        out.groups.append(group)
    for more, names in folded_tasks.items():
        count = Counter(states[more])
        loop = more.removesuffix(_MORE)
        shown_iterations = sum(1 for i in iterations[loop] if f"{loop}[{i}]" not in hidden)
        hidden_count = len(iterations[loop]) - shown_iterations
        out.more.append(
            {
                "name": more,
                "kind": "more",
                "group": loop,
                "label": f"+{hidden_count} more iteration{'' if hidden_count == 1 else 's'}",
                "state": worst(count),
                "states": dict(sorted(count.items())),
                "tasks": names,
            }
        )
    return out


def _count_text(count: int | None) -> str:
    if count is None:
        return "iterations not known yet"
    if count == 0:
        return "no iterations"
    return f"{count} iteration{'' if count == 1 else 's'}"


def collapse_defaults(groups: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
    """Add to each group `nodes` (how many nodes it holds, at any depth), `tasks` and
    `states` (the tasks they stand for, and their states counted), `state` (the worst of
    those) and `collapsed`, whether the page draws it collapsed at first.

    A group holding more than `COLLAPSE_OVER` nodes is collapsed; then, while fewer than
    `MIN_SHOWN` nodes would show (a run that is one big nested pipeline, say), the largest
    collapsed group on show opens, its own large groups staying collapsed.
    """
    by_id = {g["id"]: g for g in groups}
    for group in groups:
        group.update(nodes=0, tasks=0, states=Counter(), collapsed=False)
    for node in nodes:
        # A "+K more" node counts as one node, and as the tasks it stands for.
        states = Counter(node.get("states") or {node["state"]: 1})
        gid = node.get("group", "")
        while gid in by_id:
            by_id[gid]["nodes"] += 1
            by_id[gid]["tasks"] += sum(states.values())
            by_id[gid]["states"].update(states)
            gid = by_id[gid]["parent"]
    for group in groups:
        group["collapsed"] = group["nodes"] > COLLAPSE_OVER

    def hidden_by(gid: str) -> str | None:
        """The outermost collapsed group above `gid` (itself included), if any."""
        found = None
        while gid in by_id:
            if by_id[gid]["collapsed"]:
                found = gid
            gid = by_id[gid]["parent"]
        return found

    while True:
        shown = {hidden_by(n.get("group", "")) or n["name"] for n in nodes}
        closed = [by_id[s] for s in shown if s in by_id]
        if len(shown) >= MIN_SHOWN or not closed:
            break
        max(closed, key=lambda g: (g["nodes"], g["id"]))["collapsed"] = False
    for group in groups:
        group["states"] = dict(sorted(group["states"].items()))
        group["state"] = worst(Counter(group["states"]))
