"""The boxes of a run's graph: nested pipelines, ParallelFor loops and their iterations.

Where an executed task sits comes from the IR: the chain of nested pipelines and loops
above its component (conditions and exit handlers are transparent, as they are in task
names), with its loop indices read from its name (`scale.add[1]`, `add[0][1]`). A nested
pipeline is a group named by its path (`inner.leaf`); a loop is a group labelled with its
number of iterations (`for-loop-2 (3 iterations)`), holding one group per iteration
labelled with its index and, for a loop over a literal list, its item (`#1: 20`).

A loop with many iterations would make the graph unreadable, so each loop shows at most
`limit` of them: failed ones first, then running ones, then the rest in order. The others
fold into one "+K more" node in the loop's box, which stands in for their tasks in edges
and lists them (with their states) for the task panel.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from headwater.spec.ir import is_control_flow_task

__all__ = ["ITERATIONS_SHOWN", "Grouping", "group_tasks", "loop_scopes"]

#: Iterations of one loop drawn by default; `?iterations=N` asks for more.
ITERATIONS_SHOWN = 5
#: Worst first: the colour of a "+K more" node is that of its worst hidden task.
_SEVERITY = ("FAILED", "INTERRUPTED", "RUNNING", "PENDING", "CANCELED", "SUCCEEDED", "CACHED")
_INDEX = re.compile(r"\[(\d+)\]")
_MORE = ":more"


@dataclass(frozen=True)
class Scope:
    """One level above a task in the IR: a nested pipeline, or a loop (with its literal
    items, when it iterates over a list written in the pipeline)."""

    kind: str  # "pipeline" or "loop"
    name: str
    items: list[Any] | None = None


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


def loop_scopes(ir: dict[str, Any] | None) -> dict[str, list[Scope]]:
    """Executor task names without loop indices (`scale.add`) -> the scopes above them,
    outermost first."""
    if not ir:
        return {}
    components = ir.get("components", {})
    found: dict[str, list[Scope]] = {}

    def walk(dag: dict[str, Any], prefix: str, chain: list[Scope]) -> None:
        for name, spec in (dag.get("tasks") or {}).items():
            if not isinstance(spec, dict):
                continue
            component = components.get(spec.get("componentRef", {}).get("name", ""), {})
            if not (isinstance(component, dict) and "dag" in component):
                found[prefix + name] = chain
            elif "parameterIterator" in spec or "artifactIterator" in spec:
                walk(component["dag"], prefix, [*chain, Scope("loop", name, _raw_items(spec))])
            elif is_control_flow_task(name):
                walk(component["dag"], prefix, chain)
            else:
                walk(component["dag"], f"{prefix}{name}.", [*chain, Scope("pipeline", name)])

    walk(ir.get("root", {}).get("dag", {}), "", [])
    return found


def _raw_items(spec: dict[str, Any]) -> list[Any] | None:
    raw = (spec.get("parameterIterator") or {}).get("items", {}).get("raw")
    if not isinstance(raw, str):
        return None
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    return items if isinstance(items, list) else None


def group_tasks(
    tasks: list[tuple[str, str, str]], ir: dict[str, Any] | None, *, limit: int = ITERATIONS_SHOWN
) -> Grouping:
    """Place `tasks` ((name, state, parent_dag) in run order) in groups, folding iterations
    past `limit` per loop.

    A task the IR does not explain (no IR stored, say) falls back to its record's
    `parent_dag`, the nested pipelines it ran in.
    """
    scopes = loop_scopes(ir)
    groups: dict[str, dict[str, Any]] = {}
    # Per task, the groups above it (outermost first); per loop group, its iterations' states.
    paths: dict[str, list[str]] = {}
    iterations: dict[str, dict[int, list[str]]] = {}
    for name, state, parent_dag in tasks:
        chain = scopes.get(_INDEX.sub("", name))
        if chain is None:
            chain = [Scope("pipeline", p) for p in parent_dag.split(".")] if parent_dag else []
        indices = [int(i) for i in _INDEX.findall(name)]
        path: list[str] = []
        current = ""
        for scope in chain:
            here = f"{current}.{scope.name}" if current else scope.name
            if scope.kind == "pipeline" or not indices:
                groups.setdefault(
                    here, {"id": here, "label": scope.name, "parent": current, "kind": "pipeline"}
                )
                path.append(here)
                current = here
                continue
            index = indices.pop(0)
            loop = groups.setdefault(
                here,
                {"id": here, "label": scope.name, "parent": current, "kind": "loop",
                 "loop": scope.name, "items": len(scope.items) if scope.items else 0},
            )  # fmt: skip
            iteration = f"{here}[{index}]"
            groups.setdefault(
                iteration,
                {"id": iteration, "label": _iteration_label(index, scope.items), "parent": here,
                 "kind": "iteration", "index": index},
            )  # fmt: skip
            iterations.setdefault(loop["id"], {}).setdefault(index, []).append(state)
            path += [here, iteration]
            current = iteration
        paths[name] = path
    hidden = _hidden_iterations(iterations, limit)
    return _fold(tasks, groups, paths, iterations, hidden)


def _iteration_label(index: int, items: list[Any] | None) -> str:
    if items is None or index >= len(items):
        return f"#{index}"
    item = items[index]
    text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
    return f"#{index}: {text if len(text) <= 24 else text[:23] + '…'}"


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
            count = max(group.pop("items"), len(iterations[gid]))
            group["iterations"] = count
            group["label"] = f"{group['label']} ({count} iteration{'' if count == 1 else 's'})"
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
                "state": next((s for s in _SEVERITY if count[s]), "SKIPPED"),
                "states": dict(sorted(count.items())),
                "tasks": names,
            }
        )
    return out
