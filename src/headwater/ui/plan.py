"""A run's plan: every executor task its IR starts, and the boxes it sits in.

The graph of a running run draws what is still to come, not only what has started: this
walks the IR (nested pipelines, ParallelFor loops, conditions) and names each executor task
as the engine will (`inner.train`, `train[2]`, `add[1][0]`). A loop's iterations are known
from a literal list in the pipeline, from the recorded output (or pipeline parameter) it
iterates over, or from the iterations recorded so far; a loop whose items are not known yet
is drawn once, its tasks named without an index (as the engine records a loop over nothing).

Every box is a group: a nested pipeline (by its name), a loop (`for-loop-2`), each of its
iterations, labelled by its item (`lr=0.1 width=16`, `x=3`), and a condition, labelled
with its test as the user wrote it (`if mode == 'a'`). Exit handlers and the
`condition-branches` wrapper of an If/Elif/Else are transparent, as they are in task names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.spec.ir import is_control_flow_task
from headwater.task import split_iterations

__all__ = ["Plan", "condition_text", "item_text", "plan_run"]

_CHANNEL = re.compile(r"inputs\.parameter_values\['pipelinechannel--([^']+)'\]")
_PLAIN_CHANNEL = re.compile(r"inputs\.parameter_values\['([^']+)'\]")
_CAST = re.compile(r"\b(?:int|double|string|bool)\(([A-Za-z0-9_.-]+)\)")
#: Characters of an iteration's label; the page wraps it on two lines of half this.
LABEL_CHARS = 64


@dataclass
class Plan:
    """The tasks (in IR order, each with the groups above it, outermost first) and groups."""

    tasks: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)


def plan_run(
    ir: Mapping[str, Any] | None,
    recorded: Mapping[str, Mapping[str, Any]],
    parameters: Mapping[str, Any],
) -> Plan:
    """The plan of a run of `ir`, given its recorded tasks (`name -> {"inputs", "outputs"}`)
    and its pipeline parameters. An empty plan without an IR."""
    plan = Plan()
    if not ir:
        return plan
    walker = _Walker(ir.get("components") or {}, recorded, parameters)
    walker.walk((ir.get("root") or {}).get("dag") or {}, "", (), "", [], plan)
    return plan


class _Walker:
    def __init__(
        self,
        components: Mapping[str, Any],
        recorded: Mapping[str, Mapping[str, Any]],
        parameters: Mapping[str, Any],
    ) -> None:
        self.components = components
        self.recorded = recorded
        self.parameters = parameters
        # (base name, indices) of every recorded task, to count a loop's iterations.
        self.indexed = [split_iterations(n) for n in recorded]

    def body(self, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        component = self.components.get((spec.get("componentRef") or {}).get("name", ""))
        dag = component.get("dag") if isinstance(component, dict) else None
        return dag if isinstance(dag, dict) else None

    def walk(
        self,
        dag: Mapping[str, Any],
        prefix: str,
        indices: tuple[int, ...],
        parent: str,
        path: list[str],
        plan: Plan,
    ) -> None:
        suffix = "".join(f"[{i}]" for i in indices)
        for name, spec in (dag.get("tasks") or {}).items():
            if not isinstance(spec, dict):
                continue
            body = self.body(spec)
            gid = f"{parent}.{name}" if parent else name
            if body is None:
                plan.tasks[f"{prefix}{name}{suffix}"] = path
            elif "parameterIterator" in spec or "artifactIterator" in spec:
                self.loop(name, spec, body, prefix, indices, parent, path, plan)
            elif (spec.get("triggerPolicy") or {}).get("condition"):
                text = condition_text(spec["triggerPolicy"]["condition"])
                plan.groups[gid] = {
                    "id": gid, "label": f"if {text}", "parent": parent, "kind": "condition",
                    "condition": text,
                }  # fmt: skip
                self.walk(body, prefix, indices, gid, [*path, gid], plan)
            elif name.startswith(("condition-branches-", "exit-handler-")):
                self.walk(body, prefix, indices, parent, path, plan)
            else:
                plan.groups[gid] = {"id": gid, "label": name, "parent": parent, "kind": "pipeline"}
                self.walk(body, f"{prefix}{name}.", indices, gid, [*path, gid], plan)

    def loop(
        self,
        name: str,
        spec: Mapping[str, Any],
        body: Mapping[str, Any],
        prefix: str,
        indices: tuple[int, ...],
        parent: str,
        path: list[str],
        plan: Plan,
    ) -> None:
        gid = f"{parent}.{name}" if parent else name
        group: dict[str, Any] = {"id": gid, "label": name, "parent": parent, "kind": "loop"}
        plan.groups[gid] = group
        items = self.items(spec, prefix, indices)
        # Drawn once without an index first: the names of the body's tasks tell which
        # recorded tasks are iterations of this loop.
        once = Plan()
        self.walk(body, prefix, indices, gid, [*path, gid], once)
        if any(name in self.recorded for name in once.tasks):
            count: int | None = 0  # skipped (a condition not taken) or over nothing
        elif items is not None:
            count = len(items)
        else:
            count = self.recorded_count(once, indices)
        group["iterations"] = count
        if not count:
            plan.tasks.update(once.tasks)
            plan.groups.update(once.groups)
            return
        item_input = (spec.get("parameterIterator") or {}).get("itemInput", "")
        bound = [b for b in self.bound_inputs(body, item_input) if b[0]]
        name = next((n for _, n, sel in self.bound_inputs(body, item_input) if not sel), "")
        for i in range(count):
            iid = f"{gid}[{i}]"
            plan.groups[iid] = {
                "id": iid, "label": f"#{i}", "parent": gid, "kind": "iteration", "index": i,
            }  # fmt: skip
            inner = (*indices, i)
            self.walk(body, prefix, inner, iid, [*path, gid, iid], plan)
            item = items[i] if items is not None and i < len(items) else None
            plan.groups[iid]["label"] = (
                item_text(item, name)
                if items is not None
                else self.iteration_label(i, bound, prefix, inner)
            )

    def items(
        self, spec: Mapping[str, Any], prefix: str, indices: tuple[int, ...]
    ) -> list[Any] | None:
        """The loop's items if known now: a literal list, a recorded task output, or a
        pipeline parameter of the root DAG."""
        source = (spec.get("parameterIterator") or {}).get("items") or {}
        if isinstance(source.get("raw"), str):
            return _as_list(source["raw"])
        channel = source.get("inputParameter")
        given = ((spec.get("inputs") or {}).get("parameters") or {}).get(channel or "") or {}
        suffix = "".join(f"[{i}]" for i in indices)
        if "taskOutputParameter" in given:
            out = given["taskOutputParameter"]
            task = self.recorded.get(f"{prefix}{out.get('producerTask', '')}{suffix}")
            if task is not None and out.get("outputParameterKey") in (task.get("outputs") or {}):
                return _as_list(task["outputs"][out["outputParameterKey"]])
        elif "componentInputParameter" in given and not prefix and not indices:
            key = given["componentInputParameter"]
            if key in self.parameters:
                return _as_list(self.parameters[key])
        return None

    def recorded_count(self, once: Plan, indices: tuple[int, ...]) -> int | None:
        """Iterations recorded so far of the loop whose tasks (unindexed) are `once`."""
        bases = {split_iterations(n)[0] for n in once.tasks}
        depth = len(indices)
        seen = [
            found[depth]
            for base, found in self.indexed
            if base in bases and len(found) > depth and found[:depth] == indices
        ]
        return max(seen) + 1 if seen else None

    def iteration_label(
        self, index: int, bound: list[tuple[str, str, str]], prefix: str, indices: tuple[int, ...]
    ) -> str:
        """The item of one iteration, as the loop's tasks recorded it (`#index` until then)."""
        suffix = "".join(f"[{i}]" for i in indices)
        for task, input_name, selector in bound:
            inputs = (self.recorded.get(f"{prefix}{task}{suffix}") or {}).get("inputs") or {}
            if input_name in inputs:
                if not selector:
                    return item_text(inputs[input_name], input_name)
                picked = {n: inputs[n] for t, n, s in bound if t == task and s and n in inputs}
                return item_text(picked, "")
        return f"#{index}"

    def bound_inputs(self, body: Mapping[str, Any], item: str) -> list[tuple[str, str, str]]:
        """(task, input, selector) for each input of the loop body's executor tasks that takes
        the loop's item `item` (or, with a selector, a field of it). Where the item goes on
        into an inner loop or condition, the inputs there that take it come with task ""."""
        found = []
        for task, spec in (body.get("tasks") or {}).items():
            params = ((spec or {}).get("inputs") or {}).get("parameters") or {}
            inner = self.body(spec or {})
            for input_name, given in params.items():
                if not isinstance(given, dict) or given.get("componentInputParameter") != item:
                    continue
                selector = str(given.get("parameterExpressionSelector", ""))
                if inner is None:
                    found.append((task, input_name, selector))
                elif is_control_flow_task(task) and not selector:
                    found += [("", n, s) for _, n, s in self.bound_inputs(inner, input_name)]
        return found


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def item_text(item: Any, name: str = "") -> str:
    """A loop item, short: `x=3` for a scalar given as input `x`, `lr=0.1 width=16` for a
    dict (nested dicts flattened to their leaves), numbers to 3 significant digits."""

    def leaves(value: Any, key: str) -> list[tuple[str, Any]]:
        if isinstance(value, dict) and value:
            return [pair for k, v in value.items() for pair in leaves(v, str(k))]
        return [(key, value)]

    def show(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3g}"
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), default=str)

    # Nested leaves first: a trial's parameters say more than its bookkeeping.
    pairs = sorted(leaves(item, name), key=lambda p: not isinstance(item, dict) or p[0] in item)
    text = " ".join(f"{k}={show(v)}" if k else show(v) for k, v in pairs)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def condition_text(condition: str) -> str:
    """A compiled condition as the user wrote it: `inputs.parameter_values[
    'pipelinechannel--mode'] == 'a'` -> `mode == 'a'`, `int(level) > 3` -> `level > 3`."""
    text = _CHANNEL.sub(lambda m: m.group(1), condition)
    text = _PLAIN_CHANNEL.sub(lambda m: m.group(1), text)
    previous = None
    while previous != text:
        previous, text = text, _CAST.sub(lambda m: m.group(1), text)
    return text.replace("!(", "not (").replace("&&", "and").replace("||", "or")
