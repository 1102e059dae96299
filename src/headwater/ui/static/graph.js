// Lays out a run's task graph top-down with dagre (vendored in vendor/dagre, MIT).
// Pure: takes the `graph` of GET /api/v1/runs/{id} and returns positions, so it runs (and
// is tested) without a browser. The page draws the server's layered layout first; this
// replaces it with dagre's, which also minimises edge crossings and routes edges.
"use strict";

function layoutGraph(dagre, graph, nodeWidth, nodeHeight) {
  // Nested pipelines, loops and loop iterations are compound nodes ("group:" ids keep them
  // apart from task names); a loop's folded iterations are one ordinary "+K more" node.
  const g = new dagre.graphlib.Graph({ compound: true });
  g.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 56, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  const groupId = (name) => `group:${name}`;
  for (const grp of graph.groups || []) g.setNode(groupId(grp.id), { label: grp.label, kind: grp.kind || "pipeline", paddingTop: 24 });
  for (const grp of graph.groups || []) if (grp.parent) g.setParent(groupId(grp.id), groupId(grp.parent));
  for (const n of graph.nodes) {
    g.setNode(n.name, { width: nodeWidth, height: nodeHeight });
    if (n.group) g.setParent(n.name, groupId(n.group));
  }
  for (const e of graph.edges) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const nodes = {};
  const groups = [];
  for (const name of g.nodes()) {
    const n = g.node(name);
    // dagre gives centres; the SVG places a node by its top-left corner.
    const box = { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height };
    if (name.startsWith("group:")) groups.push({ id: name.slice(6), label: n.label, kind: n.kind, ...box });
    else nodes[name] = { x: box.x, y: box.y };
  }
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points.map((p) => [p.x, p.y]) }));
  return { nodes, edges, groups, width: g.graph().width, height: g.graph().height };
}

if (typeof module !== "undefined") module.exports = { layoutGraph };
