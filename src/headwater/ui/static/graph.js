// Lays out a run's task graph top-down with dagre (vendored in vendor/dagre, MIT).
// Pure: takes the `graph` of GET /api/v1/runs/{id} and returns positions, so it runs (and
// is tested) without a browser. The page draws the server's layered layout first; this
// replaces it with dagre's, which also minimises edge crossings and routes edges.
"use strict";

function layoutGraph(dagre, graph, nodeWidth, nodeHeight) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 56, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.name, { width: nodeWidth, height: nodeHeight });
  for (const e of graph.edges) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const nodes = {};
  for (const name of g.nodes()) {
    const n = g.node(name);
    // dagre gives centres; the SVG places a node by its top-left corner.
    nodes[name] = { x: n.x - nodeWidth / 2, y: n.y - nodeHeight / 2 };
  }
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points.map((p) => [p.x, p.y]) }));
  return { nodes, edges, width: g.graph().width, height: g.graph().height };
}

if (typeof module !== "undefined") module.exports = { layoutGraph };
