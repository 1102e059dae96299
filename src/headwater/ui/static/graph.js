// Lays out a run's task graph top-down with dagre (vendored in vendor/dagre, MIT).
// Pure: takes the `graph` of GET /api/v1/runs/{id} and returns positions, so it runs (and
// is tested) without a browser. The page draws the server's layered layout first; this
// replaces it with dagre's, which also minimises edge crossings and routes edges.
// `visibleGraph` folds collapsed groups into one node each before the layout.
"use strict";

// The graph as drawn with the groups in `collapsed` (a Set of group ids) folded: each
// outermost collapsed group becomes one node "collapsed:<id>" (kind "collapsed") standing
// for every node inside it, in edges too.
function visibleGraph(graph, collapsed) {
  const groups = new Map((graph.groups || []).map((g) => [g.id, g]));
  const hiddenBy = (gid) => {
    let found = null;
    for (let id = gid; id && groups.has(id); id = groups.get(id).parent) if (collapsed.has(id)) found = id;
    return found;
  };
  const nodeOf = new Map();
  const nodes = [];
  const made = new Set();
  for (const n of graph.nodes) {
    const h = hiddenBy(n.group);
    if (!h) { nodeOf.set(n.name, n.name); nodes.push(n); continue; }
    const name = `collapsed:${h}`;
    nodeOf.set(n.name, name);
    if (made.has(h)) continue;
    made.add(h);
    const g = groups.get(h);
    nodes.push({ name, kind: "collapsed", group: g.parent, groupId: h, label: g.label, groupKind: g.kind,
      state: g.state, states: g.states, count: g.tasks });
  }
  const seen = new Set();
  const edges = [];
  for (const e of graph.edges) {
    const from = nodeOf.get(e.from), to = nodeOf.get(e.to);
    const key = `${from}\u0000${to}`;
    if (!from || !to || from === to || seen.has(key)) continue;
    seen.add(key);
    edges.push({ from, to });
  }
  return { nodes, edges, groups: (graph.groups || []).filter((g) => !hiddenBy(g.id)) };
}

// Pixels above a node in a loop iteration's box, for the iteration's two-line label.
const LABEL_ROOM = 22;

function layoutGraph(dagre, graph, nodeWidth, nodeHeight) {
  // Nested pipelines, loops and loop iterations are compound nodes ("group:" ids keep them
  // apart from task names); a loop's folded iterations are one ordinary "+K more" node.
  const g = new dagre.graphlib.Graph({ compound: true });
  g.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 64, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  const groupId = (name) => `group:${name}`;
  for (const grp of graph.groups || []) g.setNode(groupId(grp.id), { label: grp.label, kind: grp.kind || "pipeline", paddingTop: 24 });
  for (const grp of graph.groups || []) if (grp.parent) g.setParent(groupId(grp.id), groupId(grp.parent));
  // dagre leaves little room above a box's first node, and an iteration's label takes two
  // lines: its nodes are laid out taller and drawn at the bottom of their place.
  const kinds = new Map((graph.groups || []).map((grp) => [grp.id, grp.kind]));
  const room = new Map();
  for (const n of graph.nodes) {
    const extra = kinds.get(n.group) === "iteration" ? LABEL_ROOM : 0;
    room.set(n.name, extra);
    g.setNode(n.name, { width: nodeWidth, height: nodeHeight + extra });
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
    else nodes[name] = { x: box.x, y: box.y + room.get(name) };
  }
  const edges = g.edges().map((e) => {
    const points = g.edge(e).points.map((p) => [p.x, p.y]);
    points[points.length - 1][1] += room.get(e.w) || 0; // to the drawn top of the node
    return { from: e.v, to: e.w, points };
  });
  return { nodes, edges, groups, width: g.graph().width, height: g.graph().height };
}

if (typeof module !== "undefined") module.exports = { layoutGraph, visibleGraph };
