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

function setupRuns() {
  for (const button of document.querySelectorAll("button.delete")) {
    button.addEventListener("click", async () => {
      const id = button.dataset.run;
      if (!confirm(`Delete run ${id} and the artifacts only it uses?`)) return;
      const r = await fetch(`/api/v1/runs/${encodeURIComponent(id)}`, { method: "DELETE", credentials: "same-origin" });
      if (r.ok) button.closest("tr").remove();
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

function kvTable(obj) {
  const table = el("table", { class: "kv" });
  for (const [k, v] of Object.entries(obj || {})) {
    const cell = el("td");
    if (Array.isArray(v)) {
      v.forEach((uri, i) => {
        if (i) cell.append(el("br"));
        cell.append(el("a", { href: `/artifacts/${encodeURIComponent(uri)}` }, uri.split("/").slice(-2).join("/")));
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
      ` · attempts ${task.attempts}`),
    el("h3", {}, "Inputs"), kvTable(task.inputs), kvTable(task.artifacts.inputs),
    el("h3", {}, "Outputs"), kvTable(task.outputs), kvTable(task.artifacts.outputs),
  );
  if (task.error) panel.append(el("h3", {}, "Error"), el("pre", { class: "error" }, `${task.error.error_type}: ${task.error.message}\n\n${task.error.traceback || ""}`));
  panel.append(el("h3", {}, "Log ", el("a", { href: `${logUrl}?download=true` }, "download")), log);
  try {
    const r = await fetch(`${logUrl}?tail=200`, { credentials: "same-origin" });
    log.textContent = r.ok ? (await r.text()) || "(empty)" : (await r.json()).error;
  } catch (err) { log.textContent = String(err); }
}

// A "+K more" node: the tasks of a loop's iterations that the graph folded away, by
// iteration, each opening its task; and a link to the page drawing every iteration.
function showMore(runId, node, tasks, onPick) {
  const panel = document.getElementById("task-panel");
  for (const g of document.querySelectorAll("g.node")) g.classList.toggle("selected", g.dataset.task === node.name);
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const table = el("table", { class: "folded" });
  for (const name of node.tasks) {
    const t = byName.get(name);
    const link = el("a", { href: "#", "data-task": name }, name);
    link.addEventListener("click", (event) => { event.preventDefault(); if (t) onPick(t); });
    table.append(el("tr", {}, el("td", {}, link), el("td", {}, el("span", { class: `state ${t ? t.state : ""}` }, t ? t.state : "?"))));
  }
  const all = new URL(location.href);
  all.searchParams.set("iterations", "1000");
  panel.replaceChildren(
    el("h2", {}, node.label),
    el("p", {}, `Iterations of ${node.group} not drawn (failed and running ones are drawn first). `,
      el("a", { href: all.pathname + all.search }, "Draw every iteration")),
    table,
  );
}

const SVG_NS = "http://www.w3.org/2000/svg";

// Re-lay the server's layered graph out with dagre (fewer crossings, routed edges).
function relayout(svg, graph) {
  if (!window.dagre || typeof layoutGraph !== "function") return; // keep the server's layout
  const laid = layoutGraph(window.dagre, graph, 180, 44);
  for (const g of svg.querySelectorAll("g.node")) {
    const p = laid.nodes[g.dataset.task];
    if (p) g.setAttribute("transform", `translate(${p.x},${p.y})`);
  }
  for (const line of svg.querySelectorAll(".edge, .group")) line.remove();
  const first = svg.querySelector("g.node");
  for (const grp of laid.groups) {
    const box = document.createElementNS(SVG_NS, "g");
    box.setAttribute("class", `group ${grp.kind || "pipeline"}`);
    box.dataset.group = grp.id;
    const rect = document.createElementNS(SVG_NS, "rect");
    for (const [k, v] of Object.entries({ x: grp.x, y: grp.y, width: grp.width, height: grp.height, rx: 8 })) rect.setAttribute(k, v);
    const label = document.createElementNS(SVG_NS, "text");
    label.setAttribute("x", grp.x + 8);
    label.setAttribute("y", grp.y + 16);
    label.textContent = grp.label;
    box.append(rect, label);
    svg.insertBefore(box, first);
  }
  for (const e of laid.edges) {
    const path = document.createElementNS(SVG_NS, "polyline");
    path.setAttribute("class", "edge");
    path.setAttribute("fill", "none");
    path.setAttribute("marker-end", "url(#arrow)");
    path.setAttribute("points", e.points.map((p) => p.join(",")).join(" "));
    svg.insertBefore(path, first);
  }
  svg.setAttribute("width", laid.width);
  svg.setAttribute("height", laid.height);
}

function setupRun() {
  const svg = document.getElementById("dag");
  if (!svg) return;
  const runId = svg.dataset.run;
  let run = null, selected = null;
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
  const bind = () => {
    for (const g of svg.querySelectorAll("g.node")) {
      g.onclick = () => choose(g.dataset.task);
      g.onkeydown = (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); g.onclick(); } };
    }
  };
  let laidOut = false;
  const refresh = async () => {
    const query = iterations ? `?iterations=${encodeURIComponent(iterations)}` : "";
    run = await getJSON(`/api/v1/runs/${encodeURIComponent(runId)}${query}`);
    if (!laidOut) { laidOut = true; relayout(svg, run.graph); }
    const names = run.tasks.map((t) => t.name).join("|");
    const nodes = run.graph.nodes.map((n) => n.name).join("|");
    // New tasks, or other iterations drawn (one failed, say): lay the graph out again.
    if (names !== svg.dataset.tasks || (svg.dataset.nodes && nodes !== svg.dataset.nodes)) { location.reload(); return; }
    if (pending !== null) { const name = pending; pending = null; choose(name); }
    for (const n of run.graph.nodes) {
      const g = svg.querySelector(`g.node[data-task="${CSS.escape(n.name)}"]`);
      if (!g) continue;
      const more = n.kind === "more";
      g.setAttribute("class", `node${more ? " more" : ""} ${n.state}${n.name === selected ? " selected" : ""}`);
      g.querySelector(".node-state").textContent = more
        ? Object.entries(n.states).map(([s, k]) => `${k} ${s}`).join(" · ")
        : n.state;
    }
    const state = document.getElementById("run-state");
    state.textContent = run.state;
    state.className = `state ${run.state}`;
    if (run.state === "RUNNING") setTimeout(refresh, 2000);
    else if (svg.dataset.state === "RUNNING") location.reload(); // finished: show metrics and errors
  };
  bind();
  refresh().catch((err) => console.error(err));
}

document.addEventListener("DOMContentLoaded", () => { setupRuns(); setupRun(); });
