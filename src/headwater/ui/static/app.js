// Headwater UI behaviour: deleting runs, picking runs to compare, the task panel and live
// updates of a running run (polling the JSON API every 2 s). No libraries, no network but
// this server's own API; requests carry the session cookie set by ?token=.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// kfp.Client prints its links in the KFP UI's form (`/#/runs/details/ID`,
// `/#/experiments/details/ID`, `/#/pipelines/details/ID[/version/VID]`,
// `/#/recurringrun/details/ID`; `headwater server` keeps KFP's ids): open the same page here
// instead of the runs list.
const KFP_LINKS = [
  [/^#\/runs\/details\/([\w-]+)$/, (m) => `/runs/${m[1]}`],
  [/^#\/experiments\/details\/([\w-]+)$/, (m) => `/experiments/${m[1]}`],
  [/^#\/pipelines\/details\/([\w-]+)\/version\/([\w-]+)$/, (m) => `/pipelines/${m[1]}/versions/${m[2]}`],
  [/^#\/pipelines\/details\/([\w-]+)$/, (m) => `/pipelines/${m[1]}`],
  [/^#\/recurringruns?\/details\/([\w-]+)$/, (m) => `/recurring-runs/${m[1]}`],
];

function followKfpLink() {
  if (window.location.pathname !== "/") return;
  for (const [pattern, page] of KFP_LINKS) {
    const match = pattern.exec(window.location.hash);
    if (match) { window.location.replace(page(match)); return; }
  }
}
followKfpLink();

// A POST of an empty JSON object to this server's API (a run's terminate or retry;
// catalog.js archives experiments and enables recurring runs with it): the server's
// BrowserGuard lets only JSON change anything. Throws the API's error message.
async function postAction(url) {
  const r = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });
  if (!r.ok) throw new Error((await r.json()).error || r.statusText);
}

function setupRunActions() {
  for (const verb of ["terminate", "retry"]) {
    for (const button of document.querySelectorAll(`button.${verb}`)) {
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          await postAction(`/api/v1/runs/${encodeURIComponent(button.dataset.run)}/${verb}`);
          location.reload();
        } catch (e) {
          alert(e.message);
          button.disabled = false;
        }
      });
    }
  }
}

function setupRuns() {
  for (const button of document.querySelectorAll("button.delete")) {
    button.addEventListener("click", async () => {
      const id = button.dataset.run;
      if (!confirm(`Delete run ${id} and the artifacts only it uses?`)) return;
      const r = await fetch(`/api/v1/runs/${encodeURIComponent(id)}`, { method: "DELETE", credentials: "same-origin" });
      if (r.ok) (button.closest("tr") ? button.closest("tr").remove() : location.assign("/"));
      else alert((await r.json()).error);
    });
  }
  const form = document.getElementById("compare-form");
  if (!form) return;
  form.addEventListener("submit", (event) => {
    const picked = [...document.querySelectorAll("input.pick:checked")].map((c) => c.value);
    if (picked.length < 2 || picked.length > 10) {
      event.preventDefault();
      alert("Pick 2 to 10 runs to compare.");
      return;
    }
    document.getElementById("compare-runs").value = picked.join(",");
  });
}

// Values by name; a list is artifact URIs, each linked to its page and, given their `ids`
// (by name too), to its download.
function kvTable(obj, ids) {
  const table = el("table", { class: "kv" });
  for (const [k, v] of Object.entries(obj || {})) {
    const cell = el("td");
    if (Array.isArray(v)) {
      v.forEach((uri, i) => {
        if (i) cell.append(el("br"));
        cell.append(el("a", { href: `/artifacts/${encodeURIComponent(uri)}` }, uri.split("/").slice(-2).join("/")));
        const id = ids && ids[k] ? ids[k][i] : undefined;
        if (id !== undefined) cell.append(" ", el("a", { class: "download", href: `/api/v1/artifacts/${id}/download` }, "download"));
      });
    } else cell.append(el("code", {}, JSON.stringify(v)));
    table.append(el("tr", {}, el("th", {}, k), cell));
  }
  return table;
}

async function showTask(runId, task) {
  const panel = document.getElementById("task-panel");
  for (const g of document.querySelectorAll("g.node")) g.classList.toggle("selected", g.dataset.task === task.name);
  const logUrl = `/api/v1/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(task.name)}/log`;
  const log = el("pre", { class: "log" }, "loading log…");
  panel.replaceChildren(
    el("h2", {}, task.name),
    el("p", {}, el("span", { class: `state ${task.state}` }, task.state),
      task.duration ? ` · ${task.duration}` : "", task.cached_from ? ` · cached from execution ${task.cached_from}` : "",
      task.cache_key ? ` · cache key ${task.cache_key.slice(0, 12)}` : "",
      ` · attempts ${task.attempts}`,
      task.container ? ` · in image ${task.container.image}` +
        (task.container.digest ? ` (${task.container.digest.slice(0, 19)})` : "") +
        ` by ${task.container.runtime.split("/").pop()}` : "",
      task.sandbox ? ` · sandboxed (${task.sandbox.tool}, uid ${task.sandbox.uid}` +
        Object.entries(task.sandbox.enforced || {}).map(([k, v]) => `; ${k}: ${v}`).join("") + ")" : ""),
    el("h3", {}, "Inputs"), kvTable(task.inputs), kvTable(task.artifacts.inputs, (task.artifact_ids || {}).inputs),
    el("h3", {}, "Outputs"), kvTable(task.outputs), kvTable(task.artifacts.outputs, (task.artifact_ids || {}).outputs),
  );
  if (task.error) panel.append(el("h3", {}, "Error"), el("pre", { class: "error" }, `${task.error.error_type}: ${task.error.message}\n\n${task.error.traceback || ""}`));
  panel.append(el("h3", {}, "Log ", el("a", { href: `${logUrl}?download=true` }, "download")), log);
  try {
    const r = await fetch(`${logUrl}?tail=200`, { credentials: "same-origin" });
    log.textContent = r.ok ? (await r.text()) || "(empty)" : (await r.json()).error;
  } catch (err) { log.textContent = String(err); }
}

// A "+K more" node: the tasks of a loop's iterations that the graph folded away, failed and
// running ones first, a page at a time, each opening its task; and a link to the page drawing
// every iteration.
const MORE_PAGE = 100;
const FIRST = { FAILED: 0, INTERRUPTED: 0, RUNNING: 1 };

function showMore(runId, node, tasks, onPick) {
  const panel = document.getElementById("task-panel");
  for (const g of document.querySelectorAll("g.node")) g.classList.toggle("selected", g.dataset.task === node.name);
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const rank = (name) => FIRST[(byName.get(name) || {}).state] ?? 2;
  const names = node.tasks.map((name, i) => [rank(name), i, name]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[2]);
  const table = el("table", { class: "folded" });
  const more = el("button", { type: "button", class: "more-tasks" });
  let shown = 0;
  const page = () => {
    for (const name of names.slice(shown, shown + MORE_PAGE)) {
      const t = byName.get(name);
      const link = el("a", { href: "#", "data-task": name }, name);
      link.addEventListener("click", (event) => { event.preventDefault(); if (t) onPick(t); });
      table.append(el("tr", {}, el("td", {}, link), el("td", {}, el("span", { class: `state ${t ? t.state : ""}` }, t ? t.state : "?"))));
    }
    shown = Math.min(names.length, shown + MORE_PAGE);
    more.textContent = `Show ${Math.min(MORE_PAGE, names.length - shown)} more (${shown} of ${names.length} shown)`;
    more.hidden = shown >= names.length;
  };
  more.addEventListener("click", page);
  page();
  const all = new URL(location.href);
  all.searchParams.set("iterations", "1000");
  panel.replaceChildren(
    el("h2", {}, node.label),
    el("p", {}, `Iterations of ${node.group} not drawn (failed and running ones are drawn first, and listed first here). `,
      el("a", { href: all.pathname + all.search }, "Draw every iteration")),
    table,
    more,
  );
}

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function formatDuration(s) {
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

// A task's name in its box: without the nested pipelines (its box names them), cut in
// the middle so that its loop indices (`iteration`, which the server reads off the name)
// stay readable.
function shortName(name, iteration) {
  const local = name.split(".").pop();
  if (local.length <= 26) return local;
  const tail = iteration || "";
  return `${local.slice(0, 25 - tail.length)}…${tail}`;
}

function statesText(states) {
  return Object.entries(states || {}).map(([s, k]) => `${k} ${s}`).join(" · ");
}

// The second line of a node: its state and how long it ran, or what it stands for.
function nodeStatus(n) {
  if (n.kind === "more" || n.kind === "collapsed") return statesText(n.states);
  return n.duration_s === null || n.duration_s === undefined ? n.state : `${n.state} · ${formatDuration(n.duration_s)}`;
}

// Up to two lines of about `width` characters, the rest cut with an ellipsis.
function wrapLabel(text, width, lines) {
  const out = [];
  let rest = text;
  while (rest && out.length < lines) {
    if (rest.length <= width) { out.push(rest); rest = ""; break; }
    let cut = rest.lastIndexOf(" ", width);
    if (cut <= 0) cut = width;
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut).trimStart();
  }
  if (rest) out[out.length - 1] = `${out[out.length - 1].slice(0, width - 1)}…`;
  return out;
}

function drawNode(n, x, y) {
  const kind = n.kind === "more" ? " more" : n.kind === "collapsed" ? " collapsed-group" : "";
  const g = svgEl("g", { class: `node${kind} ${n.state}${n.planned ? " planned" : ""}`, tabindex: 0,
    transform: `translate(${x},${y})` });
  g.dataset.task = n.name;
  g.dataset.group = n.group || "";
  if (n.kind === "collapsed") g.dataset.expands = n.groupId;
  const title = n.kind === "collapsed"
    ? `${n.label}: ${n.count} tasks (${statesText(n.states)}); click to expand`
    : n.kind === "more" ? `${n.label} (${n.tasks.length} tasks: ${statesText(n.states)}); click to list them` : n.name;
  const label = n.kind === "collapsed" ? `▸ ${n.label}` : n.kind === "more" ? n.label : shortName(n.name, n.iteration);
  g.append(svgEl("rect", { width: 180, height: 44, rx: 6 }),
    svgEl("text", { x: 90, y: 19, "text-anchor": "middle", class: "node-label" }, wrapLabel(label, 30, 1)[0]),
    svgEl("text", { x: 90, y: 35, "text-anchor": "middle", class: "node-state" }, wrapLabel(nodeStatus(n), 32, 1)[0]),
    svgEl("title", {}, title));
  return g;
}

// Draws the run's graph, with the groups in `collapsed` folded, into the SVG's viewport
// (dagre's layout); returns the drawing's size, or null without dagre (the server's
// drawing stays).
function drawGraph(svg, graph, collapsed, onToggle) {
  if (!window.dagre || typeof layoutGraph !== "function") return null;
  const shown = visibleGraph(graph, collapsed);
  const laid = layoutGraph(window.dagre, shown, 180, 44);
  const port = svg.querySelector("#viewport");
  port.replaceChildren();
  // Edges first: a box's title (haloed, style.css) reads over the edges that cross it.
  for (const e of laid.edges) {
    port.append(svgEl("polyline", { class: "edge", fill: "none", "marker-end": "url(#arrow)",
      points: e.points.map((p) => p.join(",")).join(" ") }));
  }
  const depth = (g) => g.id.split(".").length + (g.kind === "iteration" ? 0.5 : 0);
  for (const grp of [...laid.groups].sort((a, b) => depth(a) - depth(b))) {
    const info = shown.groups.find((x) => x.id === grp.id) || {};
    const box = svgEl("g", { class: `group ${grp.kind || "pipeline"} ${info.state || ""}` });
    box.dataset.group = grp.id;
    const lines = wrapLabel(grp.label, Math.max(12, Math.floor((grp.width - 24) / 6.2)), grp.kind === "iteration" ? 2 : 1);
    const label = svgEl("text", { x: grp.x + 8, y: grp.y + 14, class: "group-label", tabindex: 0 });
    label.append(svgEl("tspan", { class: "toggle" }, "▾ "));
    lines.forEach((line, i) => label.append(svgEl("tspan", i ? { x: grp.x + 20, dy: 13 } : {}, line)));

    label.addEventListener("click", (event) => { event.stopPropagation(); onToggle(grp.id); });
    label.addEventListener("keydown", (event) => { if (event.key === "Enter") onToggle(grp.id); });
    box.append(svgEl("rect", { x: grp.x, y: grp.y, width: grp.width, height: grp.height, rx: 8 }), label,
      svgEl("title", {}, `${grp.label} (${info.tasks} tasks: ${statesText(info.states)}); click its title to fold it`));
    if (grp.kind === "condition") {
      const taken = info.state !== "SKIPPED" && info.state !== "NOT_RUN";
      const badge = svgEl("text", { x: grp.x + grp.width - 8, y: grp.y + 14, "text-anchor": "end", class: "badge" },
        info.state === "PENDING" ? "not decided" : taken ? "taken" : "not taken");
      box.append(badge);
    }
    port.append(box);
  }
  for (const n of shown.nodes) {
    const p = laid.nodes[n.name];
    if (p) port.append(drawNode(n, p.x, p.y));
  }
  return { width: laid.width, height: laid.height };
}

// Below this scale a node's text is too small to read (12 px text drawn at 6 px).
const READABLE = 0.5;

// Fit-to-view, zoom (buttons, wheel) and pan (drag) of the SVG's viewport group.
function setupView(svg) {
  const port = svg.querySelector("#viewport");
  const view = { s: 1, x: 0, y: 0 };
  let size = { width: +svg.getAttribute("width") || 400, height: +svg.getAttribute("height") || 200 };
  const apply = () => {
    port.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.s})`);
    svg.dataset.scale = view.s.toFixed(3);
  };
  // `all`: the whole graph in view. By default, a graph so tall that its text would be
  // too small to read fits the pane's width instead (at least READABLE), top first.
  const fit = (all) => {
    const width = svg.parentElement.clientWidth;
    const tallest = Math.max(320, window.innerHeight * 0.75);
    const across = Math.min(1, (width - 16) / size.width);
    view.s = Math.min(across, (tallest - 16) / size.height);
    if (all !== true) view.s = Math.max(view.s, Math.min(across, READABLE));
    const height = Math.max(160, Math.min(tallest, size.height * view.s + 16));
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    view.x = (width - size.width * view.s) / 2;
    view.y = 8;
    apply();
  };
  const zoomAt = (px, py, factor) => {
    const s = Math.min(4, Math.max(0.05, view.s * factor));
    view.x = px - ((px - view.x) * s) / view.s;
    view.y = py - ((py - view.y) * s) / view.s;
    view.s = s;
    apply();
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const r = svg.getBoundingClientRect();
    zoomAt(event.clientX - r.left, event.clientY - r.top, Math.exp(-event.deltaY * 0.0015));
  }, { passive: false });
  const centre = (factor) => zoomAt(svg.clientWidth / 2, svg.clientHeight / 2, factor);
  document.getElementById("zoom-in").addEventListener("click", () => centre(1.25));
  document.getElementById("zoom-out").addEventListener("click", () => centre(0.8));
  document.getElementById("zoom-fit").addEventListener("click", () => fit(true));
  // A drag pans; the click that ends a drag is not a click on what lies under it.
  let start = null, dragged = false;
  svg.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    start = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y, id: event.pointerId };
    dragged = false;
  });
  svg.addEventListener("pointermove", (event) => {
    if (!start) return;
    const dx = event.clientX - start.x, dy = event.clientY - start.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!dragged) { dragged = true; svg.setPointerCapture(start.id); svg.classList.add("panning"); }
    view.x = start.vx + dx;
    view.y = start.vy + dy;
    apply();
  });
  const stop = () => { start = null; svg.classList.remove("panning"); };
  svg.addEventListener("pointerup", stop);
  svg.addEventListener("pointercancel", stop);
  svg.addEventListener("click", (event) => {
    if (dragged) { event.stopPropagation(); event.preventDefault(); dragged = false; }
  }, true);
  return { fit, resize: (s) => { size = s; fit(); } };
}

function setupRun() {
  const svg = document.getElementById("dag");
  if (!svg) return;
  const runId = svg.dataset.run;
  const source = svg.dataset.source || `/api/v1/runs/${encodeURIComponent(runId)}`;
  const view = setupView(svg);
  view.fit();
  let run = null, selected = null, collapsed = null, drawn = "";
  const iterations = svg.dataset.iterations || "";
  const open = (t) => { selected = t.name; showTask(runId, t); };
  // A click before the run's JSON has arrived is kept and answered once it has.
  let pending = null;
  const choose = (name) => {
    if (!run) { pending = name; return; }
    const more = run.graph.nodes.find((n) => n.kind === "more" && n.name === name);
    if (more) { selected = more.name; showMore(runId, more, run.tasks, open); return; }
    const t = run.tasks.find((x) => x.name === name);
    if (t) open(t);
  };
  // A pipeline version's graph (no run: `data-run` is empty) has no task to show, nor
  // folded iterations to list: its panel keeps the version's parameters, and only a
  // collapsed group's node answers a click (it opens the group).
  const bind = () => {
    for (const g of svg.querySelectorAll("g.node")) {
      const action = g.dataset.expands ? () => toggle(g.dataset.expands)
        : runId ? () => choose(g.dataset.task) : null;
      g.onclick = action;
      g.onkeydown = action && ((event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); action(); } });
      g.classList.toggle("inert", !action);
      g.classList.toggle("selected", g.dataset.task === selected);
    }
  };
  // A new shape (a group opened or closed, a loop's iterations now known) is fitted to the
  // view again; new states keep the view the user chose.
  const redraw = (refit) => {
    const size = drawGraph(svg, run.graph, collapsed, toggle);
    if (size && refit) view.resize(size);
    bind();
  };
  function toggle(gid) {
    if (collapsed.has(gid)) collapsed.delete(gid); else collapsed.add(gid);
    redraw(true);
  }
  const known = new Set();
  const refresh = async () => {
    const query = iterations ? `?iterations=${encodeURIComponent(iterations)}` : "";
    run = await getJSON(`${source}${query}`);
    // Groups start as the server suggests; one the user opened or closed stays so.
    collapsed = collapsed || new Set();
    for (const g of run.graph.groups) {
      if (!known.has(g.id) && g.collapsed) collapsed.add(g.id);
      known.add(g.id);
    }
    const shape = JSON.stringify([run.graph.nodes.map((n) => n.name), run.graph.groups.map((g) => g.id)]);
    const states = JSON.stringify(run.graph.nodes.map((n) => [n.state, n.duration_s]));
    if (shape !== drawn) { drawn = shape; svg.dataset.drawnStates = states; redraw(true); }
    else if (states !== svg.dataset.drawnStates) { svg.dataset.drawnStates = states; redraw(false); }
    svg.dataset.ready = "true";
    if (pending !== null) { const name = pending; pending = null; choose(name); }
    const state = document.getElementById("run-state");
    if (!state) return; // a pipeline version's graph: nothing runs
    state.textContent = run.state;
    state.className = `state ${run.state}`;
    const going = ["QUEUED", "RUNNING", "CANCELING"];
    if (going.includes(run.state)) setTimeout(refresh, run.state === "QUEUED" ? 1000 : 2000);
    else if (going.includes(svg.dataset.state)) location.reload(); // finished: show metrics and errors
  };
  bind();
  refresh().catch((err) => console.error(err));
}

// Who you are, on a team server (`headwater server` with tokens or a trusted proxy): your name
// and role in the header, and on the lists (runs, experiments, pipelines, recurring runs) the
// namespaces you hold to pick one (`?namespace=`; none: every one you hold).
const LISTS = ["/", "/experiments", "/pipelines", "/recurring-runs"];
async function setupWhoami() {
  const header = document.querySelector("header");
  if (!header) return;
  let me;
  try { me = await getJSON("/api/v1/whoami"); } catch (err) { return; }
  if (!me.multi_user) return;
  const box = el("span", { id: "whoami", class: "whoami" },
    `${me.name} · ${me.role}`);
  box.dataset.name = me.name;
  if (LISTS.includes(location.pathname) && me.namespaces.length) {
    const params = new URLSearchParams(location.search);
    const pick = el("select", { id: "namespace-pick", "aria-label": "namespace" },
      el("option", { value: "" }, me.admin ? "every namespace" : "all my namespaces"));
    for (const ns of me.namespaces) {
      const option = el("option", { value: ns }, ns);
      if (ns === params.get("namespace")) option.selected = true;
      pick.append(option);
    }
    pick.addEventListener("change", () => {
      if (pick.value) params.set("namespace", pick.value); else params.delete("namespace");
      params.delete("offset");
      location.search = params.toString();
    });
    box.append(" ", pick);
  }
  header.append(box);
}

document.addEventListener("DOMContentLoaded", () => {
  setupRuns(); setupRunActions(); setupRun(); setupWhoami();
});
