"""The run graph: the server's layered layout, and the vendored dagre layout run in Node.js."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ui_harness import Store, call

import headwater
from headwater.ui.app import STATIC

FILES = ("vendor/dagre/dagre.min.js", "graph.js")
NODE_SCRIPT = """
const fs = require("fs"), vm = require("vm");
const ctx = { structuredClone, console };
ctx.window = ctx;
vm.createContext(ctx);
for (const f of process.argv.slice(1, 3)) vm.runInContext(fs.readFileSync(f, "utf8"), ctx);
const graph = JSON.parse(fs.readFileSync(0, "utf8"));
const layoutGraph = vm.runInContext("layoutGraph", ctx);
process.stdout.write(JSON.stringify(layoutGraph(ctx.dagre, graph, 180, 44)));
"""


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return abs(a["x"] - b["x"]) < 180 and abs(a["y"] - b["y"]) < 44


def test_layered_layout_puts_producers_above_consumers(store: Store) -> None:
    graph = call("GET", f"/api/v1/runs/{store.failed}").json()["graph"]
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert nodes["make-data"]["y"] < nodes["evaluate"]["y"] == nodes["fail"]["y"]
    assert not overlap(nodes["evaluate"], nodes["fail"])
    assert graph["width"] >= max(n["x"] for n in nodes.values()) + 180


def test_vendored_dagre_lays_out_the_api_graph(store: Store) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    graph = call("GET", f"/api/v1/runs/{store.failed}").json()["graph"]
    done = subprocess.run(
        [node, "-e", NODE_SCRIPT, *(str(STATIC / f) for f in FILES)],
        input=json.dumps(graph),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    laid = json.loads(done.stdout)
    pos = laid["nodes"]
    assert pos["make-data"]["y"] < pos["evaluate"]["y"] == pos["fail"]["y"]
    assert not overlap(pos["evaluate"], pos["fail"])
    assert {(e["from"], e["to"]) for e in laid["edges"]} == {
        ("make-data", "evaluate"),
        ("make-data", "fail"),
    }
    assert all(len(e["points"]) >= 2 for e in laid["edges"])


def test_run_page_loads_dagre_from_the_package(store: Store) -> None:
    page = call("GET", f"/runs/{store.ok}").text
    assert '<script src="/static/vendor/dagre/dagre.min.js"' in page
    for path in ["/", f"/runs/{store.ok}", f"/compare?runs={store.ok},{store.first}"]:
        html = call("GET", path).text
        assert not re.search(r'(src|href)="(https?:)?//', html), path  # nothing from elsewhere
    assert call("GET", "/static/vendor/dagre/dagre.min.js").status_code == 200
    assert "Permission is hereby granted" in (STATIC / "vendor/dagre/LICENSE").read_text()


PIPELINES = Path(__file__).parents[2] / "integration" / "pipelines"


def test_nested_pipelines_are_groups_and_chain_in_order(store: Store) -> None:
    done = headwater.run(str(PIPELINES / "nested_pipelines.py"))
    graph = call("GET", f"/api/v1/runs/{done.run_id}").json()["graph"]
    edges = {(e["from"], e["to"]) for e in graph["edges"]}
    assert edges == {
        ("inner.add", "inner.leaf.add"),
        ("inner.leaf.add", "inner.write-number"),
        ("inner.write-number", "inner-2.add"),
        ("inner-2.add", "inner-2.leaf.add"),
        ("inner-2.leaf.add", "inner-2.write-number"),
        ("inner-2.write-number", "read-number"),
    }
    groups = {g["id"]: g["parent"] for g in graph["groups"]}
    assert groups == {"inner": "", "inner.leaf": "inner", "inner-2": "", "inner-2.leaf": "inner-2"}
    assert {n["name"]: n["group"] for n in graph["nodes"]}["inner.leaf.add"] == "inner.leaf"
    node = shutil.which("node")
    if node is None:
        return
    laid = json.loads(
        subprocess.run(
            [node, "-e", NODE_SCRIPT, *(str(STATIC / f) for f in FILES)],
            input=json.dumps(graph),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    )
    boxes = {g["id"]: g for g in laid["groups"]}
    for name, where in laid["nodes"].items():
        group = {n["name"]: n["group"] for n in graph["nodes"]}[name]
        if group:
            box = boxes[group]
            assert box["x"] <= where["x"] and where["x"] + 180 <= box["x"] + box["width"]
            assert box["y"] <= where["y"] and where["y"] + 44 <= box["y"] + box["height"]


def test_loop_iterations_are_not_cross_linked(store: Store) -> None:
    done = headwater.run(str(PIPELINES / "loops_nested.py"))
    graph = call("GET", f"/api/v1/runs/{done.run_id}").json()["graph"]
    edges = {(e["from"], e["to"]) for e in graph["edges"]}
    assert ("scale.double[1]", "scale.add[1]") in edges
    assert ("scale.double[1]", "scale.add[0]") not in edges
    assert {("add[0][1]", "nested-total"), ("scale.add[2]", "total")} <= edges


UI_LOOPS = str(Path(__file__).parent / "pipelines" / "ui_loops.py")


def dagre(graph: dict[str, object]) -> dict[str, dict[str, dict[str, float]]] | None:
    """The vendored dagre's layout of `graph` (run in Node.js), or None without Node.js."""
    node = shutil.which("node")
    if node is None:
        return None
    done = subprocess.run(
        [node, "-e", NODE_SCRIPT, *(str(STATIC / f) for f in FILES)],
        input=json.dumps(graph),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    laid = json.loads(done.stdout)
    laid["groups"] = {g["id"]: g for g in laid["groups"]}
    return laid  # type: ignore[no-any-return]


def inside(inner: dict[str, float], outer: dict[str, float], w: float = 180, h: float = 44) -> bool:
    return (
        outer["x"] <= inner["x"]
        and inner["x"] + inner.get("width", w) <= outer["x"] + outer["width"]
        and outer["y"] <= inner["y"]
        and inner["y"] + inner.get("height", h) <= outer["y"] + outer["height"]
    )


def test_a_long_loop_draws_some_iterations_as_groups_and_folds_the_rest(
    store: Store, tmp_path: Path
) -> None:
    # Iteration 9 (9 * 9) fails, once the others have run.
    done = headwater.run(UI_LOOPS, {"fail_on": 81, "marks": str(tmp_path / "marks")})
    assert done.state == "FAILED"
    graph = call("GET", f"/api/v1/runs/{done.run_id}/graph").json()
    assert graph == call("GET", f"/api/v1/runs/{done.run_id}").json()["graph"]
    groups = {g["id"]: g for g in graph["groups"]}
    loop = groups.pop("for-loop-2")
    assert loop["label"] == "for-loop-2 (12 iterations)" and loop["kind"] == "loop"
    # Five iterations are drawn: the failed one first, then the first four in order.
    assert {g: (v["label"], v["parent"], v["kind"]) for g, v in groups.items()} == {
        f"for-loop-2[{i}]": (f"x={i}", "for-loop-2", "iteration") for i in (0, 1, 2, 3, 9)
    }
    nodes = {n["name"]: n for n in graph["nodes"]}
    edges = {(e["from"], e["to"]) for e in graph["edges"]}
    for i in (0, 1, 2, 3, 9):
        square, check = f"square[{i}]", f"check[{i}]"
        assert nodes[square]["group"] == nodes[check]["group"] == f"for-loop-2[{i}]"
        assert (square, check) in edges
    assert nodes["check[9]"]["state"] == "FAILED" and nodes["square[9]"]["state"] == "SUCCEEDED"
    assert nodes["total"]["group"] == "" and nodes["total"]["state"] == "CANCELED"
    more = nodes.pop("for-loop-2:more")
    hidden = [4, 5, 6, 7, 8, 10, 11]
    assert more["kind"] == "more" and more["group"] == "for-loop-2"
    assert more["label"] == "+7 more iterations" and more["state"] == "SUCCEEDED"
    assert sorted(more["tasks"]) == sorted(f"{t}[{i}]" for t in ("square", "check") for i in hidden)
    assert more["states"] == {"SUCCEEDED": 14}
    assert len(nodes) == 11  # 5 iterations of 2 tasks, and total
    assert ("for-loop-2:more", "total") in edges and ("check[9]", "total") in edges
    assert not any("[4]" in a or "[4]" in b for a, b in edges)  # folded tasks are not drawn
    tasks = {t["name"]: t for t in call("GET", f"/api/v1/runs/{done.run_id}").json()["tasks"]}
    assert tasks["check[4]"]["folded_into"] == "for-loop-2:more"
    assert tasks["check[9]"]["folded_into"] is None

    every = call("GET", f"/api/v1/runs/{done.run_id}/graph?iterations=12").json()
    assert {g["id"] for g in every["groups"]} == {"for-loop-2"} | {
        f"for-loop-2[{i}]" for i in range(12)
    }
    assert not [n for n in every["nodes"] if n["kind"] == "more"] and len(every["nodes"]) == 25
    assert call("GET", f"/api/v1/runs/{done.run_id}/graph?iterations=0").status_code == 400

    laid = dagre(graph)
    if laid is None:
        return
    boxes = laid["groups"]
    for i in (0, 1, 2, 3, 9):
        box = boxes[f"for-loop-2[{i}]"]
        assert inside(box, boxes["for-loop-2"])
        assert inside(laid["nodes"][f"square[{i}]"], box) and inside(
            laid["nodes"][f"check[{i}]"], box
        )
    assert inside(laid["nodes"]["for-loop-2:more"], boxes["for-loop-2"])
    assert not inside(laid["nodes"]["total"], boxes["for-loop-2"])


def test_nested_loops_and_a_pipeline_in_a_loop_nest_their_groups(store: Store) -> None:
    done = headwater.run(str(PIPELINES / "loops_nested.py"), pipeline_name="main")
    graph = call("GET", f"/api/v1/runs/{done.run_id}/graph").json()
    parents = {g["id"]: (g["parent"], g["label"]) for g in graph["groups"]}
    inner = "for-loop-2[1].for-loop-4"
    assert parents["for-loop-2"] == ("", "for-loop-2 (2 iterations)")
    assert parents["for-loop-2[1]"] == ("for-loop-2", "a=2")
    assert parents[inner] == ("for-loop-2[1]", "for-loop-4 (2 iterations)")
    assert parents[f"{inner}[0]"] == (inner, "b=10")
    assert parents["for-loop-6[2].scale"] == ("for-loop-6[2]", "scale")
    nodes = {n["name"]: n["group"] for n in graph["nodes"]}
    assert nodes["add[1][0]"] == f"{inner}[0]" and nodes["scale.add[2]"] == "for-loop-6[2].scale"
    assert nodes["total"] == nodes["nested-total"] == ""
    laid = dagre(graph)
    if laid is None:
        return
    boxes = laid["groups"]
    assert inside(laid["nodes"]["add[1][0]"], boxes[f"{inner}[0]"])
    assert inside(boxes[f"{inner}[0]"], boxes[inner]) and inside(boxes[inner], boxes["for-loop-2"])
    assert inside(laid["nodes"]["scale.add[2]"], boxes["for-loop-6[2].scale"])


VISIBLE_SCRIPT = """
const fs = require("fs"), vm = require("vm");
const ctx = { structuredClone, console };
ctx.window = ctx;
vm.createContext(ctx);
for (const f of process.argv.slice(1, 3)) vm.runInContext(fs.readFileSync(f, "utf8"), ctx);
const graph = JSON.parse(fs.readFileSync(0, "utf8"));
const shown = vm.runInContext("visibleGraph", ctx)(graph, new Set(["loop"]));
const laid = vm.runInContext("layoutGraph", ctx)(ctx.dagre, shown, 180, 44);
process.stdout.write(JSON.stringify({ shown, laid }));
"""


def test_a_collapsed_group_is_one_node_in_the_layout() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    graph = {
        "nodes": [
            {"name": "first", "group": "", "state": "SUCCEEDED"},
            *({"name": f"t[{i}]", "group": f"loop[{i}]", "state": "RUNNING"} for i in range(3)),
            {"name": "last", "group": "", "state": "PENDING"},
        ],
        "edges": [
            *({"from": "first", "to": f"t[{i}]"} for i in range(3)),
            *({"from": f"t[{i}]", "to": "last"} for i in range(3)),
        ],
        "groups": [
            {"id": "loop", "parent": "", "label": "loop (3 iterations)", "kind": "loop",
             "state": "RUNNING", "states": {"RUNNING": 3}, "tasks": 3, "nodes": 3},
            *({"id": f"loop[{i}]", "parent": "loop", "label": f"x={i}", "kind": "iteration"}
              for i in range(3)),
        ],
    }  # fmt: skip
    done = subprocess.run(
        [node, "-e", VISIBLE_SCRIPT, *(str(STATIC / f) for f in FILES)],
        input=json.dumps(graph),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    out = json.loads(done.stdout)
    shown, laid = out["shown"], out["laid"]
    names = [n["name"] for n in shown["nodes"]]
    assert names == ["first", "collapsed:loop", "last"]
    assert shown["nodes"][1]["count"] == 3 and shown["nodes"][1]["state"] == "RUNNING"
    assert {(e["from"], e["to"]) for e in shown["edges"]} == {
        ("first", "collapsed:loop"),
        ("collapsed:loop", "last"),
    }
    assert shown["groups"] == [] and laid["groups"] == []
    pos = laid["nodes"]
    assert pos["first"]["y"] < pos["collapsed:loop"]["y"] < pos["last"]["y"]
