"""The run graph's model: the plan read from the IR merged with the recorded tasks, iteration
labels from loop items, condition marks, durations, and which groups start collapsed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from ui_harness import Store, call

import headwater
from headwater.api.runs import get_run
from headwater.spec.loader import load_pipeline
from headwater.ui.graph import layout
from headwater.ui.groups import COLLAPSE_OVER, collapse_defaults
from headwater.ui.plan import condition_text, item_text, plan_run

UI_PLAN = str(Path(__file__).parent / "pipelines" / "ui_plan.py")


@pytest.fixture(scope="module")
def ir() -> dict[str, Any]:
    return dict(load_pipeline(UI_PLAN).raw)


def test_the_plan_names_every_task_before_any_ran(ir: dict[str, Any]) -> None:
    plan = plan_run(ir, {}, {"n": 3})
    # The loop over make-rates' output is drawn once until that output is known.
    assert plan.tasks["train"] == ["for-loop-1"] and plan.groups["for-loop-1"]["iterations"] is None
    assert {f"square[{i}]" for i in range(10)} <= set(plan.tasks)
    assert plan.tasks["check[7]"] == ["for-loop-3", "for-loop-3[7]"]
    assert [plan.groups[f"for-loop-3[{i}]"]["label"] for i in (0, 9)] == ["x=0", "x=9"]
    assert plan.tasks["best"] == plan.tasks["make-rates"] == []
    conditions = {g["id"]: g["label"] for g in plan.groups.values() if g["kind"] == "condition"}
    assert conditions == {
        "condition-5": "if mode == 'fast'",
        "condition-6": "if not (mode == 'fast')",
    }
    assert plan.tasks["report"] == ["condition-5"] and plan.tasks["report-2"] == ["condition-6"]


def test_a_loop_over_a_recorded_output_plans_one_iteration_per_item(ir: dict[str, Any]) -> None:
    recorded = {"make-rates": {"inputs": {"n": 3}, "outputs": {"Output": [0.05, 0.1, 0.15]}}}
    plan = plan_run(ir, recorded, {"n": 3})
    assert "train" not in plan.tasks
    assert [plan.groups[f"for-loop-1[{i}]"]["label"] for i in range(3)] == [
        "lr=0.05",
        "lr=0.1",
        "lr=0.15",
    ]
    assert plan.tasks["train[2]"] == ["for-loop-1", "for-loop-1[2]"]


def test_without_the_items_the_recorded_iterations_count_and_label(ir: dict[str, Any]) -> None:
    recorded = {
        "train[0]": {"inputs": {"lr": 0.5, "seconds": 0}},
        "train[1]": {"inputs": {"lr": 0.25, "seconds": 0}},
    }
    plan = plan_run(ir, recorded, {})
    assert plan.groups["for-loop-1"]["iterations"] == 2
    assert [plan.groups[f"for-loop-1[{i}]"]["label"] for i in range(2)] == ["lr=0.5", "lr=0.25"]
    # A loop over nothing: its tasks are planned (and recorded, SKIPPED) without an index.
    empty = plan_run(ir, {"make-rates": {"inputs": {}, "outputs": {"Output": []}}}, {})
    assert empty.groups["for-loop-1"]["iterations"] == 0 and "train" in empty.tasks
    # So is a loop over a literal list in a branch not taken: the record says so.
    skipped = plan_run(ir, {"square": {"inputs": {}, "outputs": {}}}, {})
    assert skipped.groups["for-loop-3"]["iterations"] == 0
    assert "square" in skipped.tasks and "square[0]" not in skipped.tasks


@pytest.mark.parametrize(
    ("compiled", "shown"),
    [
        ("inputs.parameter_values['pipelinechannel--mode'] == 'a'", "mode == 'a'"),
        ("int(inputs.parameter_values['pipelinechannel--level']) > 3", "level > 3"),
        (
            "!(inputs.parameter_values['pipelinechannel--mode'] == 'a') && "
            "inputs.parameter_values['pipelinechannel--mode'] == 'b'",
            "not (mode == 'a') and mode == 'b'",
        ),
        (
            "int(inputs.parameter_values['pipelinechannel--count-chars-Output']) == 1",
            "count-chars-Output == 1",
        ),
    ],
    ids=["string", "int", "elif", "task-output"],
)
def test_a_condition_reads_as_written(compiled: str, shown: str) -> None:
    assert condition_text(compiled) == shown


@pytest.mark.parametrize(
    ("item", "name", "shown"),
    [
        (3, "x", "x=3"),
        (0.0031622776601683794, "lr", "lr=0.00316"),
        ("a b", "", "a b"),
        (
            {"trial_index": 0, "parameters": {"lr": 0.0031622, "weight_decay": 1e-4, "width": 16}},
            "trial",
            "lr=0.00316 weight_decay=0.0001 width=16 trial_index=0",
        ),
        ({"lr": 0.1, "tags": ["a"]}, "cfg", 'lr=0.1 tags=["a"]'),
    ],
    ids=["int", "float", "string", "trial", "list-field"],
)
def test_an_iteration_is_labelled_by_its_item(item: Any, name: str, shown: str) -> None:
    assert item_text(item, name) == shown


def test_long_item_labels_are_cut() -> None:
    text = item_text({f"k{i}": i for i in range(40)}, "")
    assert len(text) == 64 and text.endswith("…")


def groups_of(tree: dict[str, str]) -> list[dict[str, Any]]:
    return [{"id": g, "parent": p, "label": g, "kind": "loop"} for g, p in tree.items()]


def test_groups_over_the_limit_start_collapsed_unless_the_graph_would_be_empty() -> None:
    groups = groups_of({"big": "", "small": "", "big.inner": "big"})
    nodes = [{"name": f"b{i}", "group": "big", "state": "SUCCEEDED"} for i in range(6)]
    nodes += [{"name": f"i{i}", "group": "big.inner", "state": "FAILED"} for i in range(3)]
    nodes += [
        {"name": f"s{i}", "group": "small", "state": "SUCCEEDED"} for i in range(COLLAPSE_OVER)
    ]
    nodes += [{"name": "top", "group": "", "state": "PENDING"}]
    collapse_defaults(groups, nodes)
    by_id = {g["id"]: g for g in groups}
    assert (by_id["big"]["nodes"], by_id["big"]["collapsed"]) == (9, True)
    assert (by_id["small"]["nodes"], by_id["small"]["collapsed"]) == (COLLAPSE_OVER, False)
    assert by_id["big"]["states"] == {"FAILED": 3, "SUCCEEDED": 6}
    assert by_id["big"]["state"] == "FAILED"  # the worst of what it holds

    # One big nested pipeline and a task: opened, or the graph would be two nodes.
    alone = groups_of({"pipe": "", "pipe.loop": "pipe"})
    nodes = [{"name": "first", "group": "", "state": "SUCCEEDED"}]
    nodes += [{"name": f"p{i}", "group": "pipe", "state": "SUCCEEDED"} for i in range(3)]
    nodes += [{"name": f"l{i}", "group": "pipe.loop", "state": "SUCCEEDED"} for i in range(12)]
    collapse_defaults(alone, nodes)
    assert [(g["id"], g["collapsed"]) for g in alone] == [("pipe", False), ("pipe.loop", True)]


@pytest.fixture(scope="module")
def plan_run_id(store: Store) -> str:
    done = headwater.run(UI_PLAN, {"n": 3, "mode": "slow"})
    assert done.state == "SUCCEEDED"
    return done.run_id


def test_a_finished_run_draws_durations_labels_and_condition_states(
    store: Store, plan_run_id: str
) -> None:
    graph = call("GET", f"/api/v1/runs/{plan_run_id}/graph").json()
    nodes = {n["name"]: n for n in graph["nodes"]}
    groups = {g["id"]: g for g in graph["groups"]}
    assert nodes["train[1]"]["state"] == "SUCCEEDED" and nodes["train[1]"]["duration_s"] > 0
    assert nodes["report"]["state"] == "SKIPPED" and nodes["report"]["duration_s"] is None
    assert not any(n.get("planned") for n in nodes.values())
    assert groups["for-loop-1"]["label"] == "for-loop-1 (3 iterations)"
    assert [groups[f"for-loop-1[{i}]"]["label"] for i in range(3)] == [
        "lr=0.05",
        "lr=0.1",
        "lr=0.15",
    ]
    assert (groups["condition-5"]["label"], groups["condition-5"]["state"]) == (
        "if mode == 'fast'",
        "SKIPPED",
    )
    assert groups["condition-6"]["state"] == "SUCCEEDED"
    # Five of the ten squares' iterations and a "+5 more" node: 11 nodes, collapsed.
    loop = groups["for-loop-3"]
    assert (loop["nodes"], loop["tasks"], loop["collapsed"]) == (11, 20, True)
    assert loop["states"] == {"SUCCEEDED": 20}
    assert not groups["for-loop-1"]["collapsed"]


def test_a_running_run_draws_the_tasks_still_to_start(store: Store, plan_run_id: str) -> None:
    run = get_run(plan_run_id)
    ir = dict(load_pipeline(UI_PLAN).raw)
    # The run as it was when only make-rates had finished (its real record).
    started = [t for t in run.tasks if t.name == "make-rates"]
    early = dataclasses.replace(run, state="RUNNING", tasks=started)
    nodes = {n["name"]: n for n in layout(early, ir)["nodes"]}
    assert nodes["make-rates"]["state"] == "SUCCEEDED" and not nodes["make-rates"]["planned"]
    for name in ("train[0]", "train[2]", "best", "square[0]", "report", "report-2"):
        assert (nodes[name]["state"], nodes[name]["planned"]) == ("PENDING", True), name
    assert nodes["best"]["duration_s"] is None
    edges = {(e["from"], e["to"]) for e in layout(early, ir)["edges"]}
    assert {("make-rates", "train[1]"), ("train[1]", "best")} <= edges
    # Once the run is over, what never started is NOT_RUN, not PENDING.
    over = dataclasses.replace(run, state="INTERRUPTED", tasks=started)
    assert {n["state"] for n in layout(over, ir)["nodes"] if n["name"] != "make-rates"} <= {
        "NOT_RUN"
    }
