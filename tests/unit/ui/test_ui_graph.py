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
