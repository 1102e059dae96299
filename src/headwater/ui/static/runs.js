// The runs table's column chooser. Which columns show is remembered in localStorage per
// scope (the pipeline when the page shows one, "*" for several), as the columns the reader
// turned on and off against the server's defaults, so a metric first logged later still
// shows by default. Without this script the server's default columns show.
"use strict";

const COLUMNS_KEY = "headwater.runs.columns:";

function loadChoice(scope) {
  try {
    const saved = JSON.parse(localStorage.getItem(COLUMNS_KEY + scope) || "{}");
    return { on: new Set(saved.on || []), off: new Set(saved.off || []) };
  } catch (e) {
    return { on: new Set(), off: new Set() }; // unreadable: the defaults
  }
}

function saveChoice(scope, choice) {
  const value = { on: [...choice.on].sort(), off: [...choice.off].sort() };
  try {
    if (!value.on.length && !value.off.length) localStorage.removeItem(COLUMNS_KEY + scope);
    else localStorage.setItem(COLUMNS_KEY + scope, JSON.stringify(value));
  } catch (e) { /* storage full or refused: the choice lasts for this page only */ }
}

function showColumn(key, shown) {
  for (const cell of document.querySelectorAll("table.runs [data-col]")) {
    if (cell.dataset.col === key) cell.hidden = !shown;
  }
}

function setupColumns() {
  const chooser = document.getElementById("columns");
  if (!chooser) return;
  const scope = chooser.dataset.scope;
  const boxes = [...chooser.querySelectorAll("input[data-col]")];
  const apply = (choice) => {
    for (const box of boxes) {
      const key = box.dataset.col;
      const byDefault = box.dataset.default === "1";
      box.checked = choice.on.has(key) || (byDefault && !choice.off.has(key));
      showColumn(key, box.checked);
    }
  };
  let choice = loadChoice(scope);
  apply(choice);
  for (const box of boxes) {
    box.addEventListener("change", () => {
      const key = box.dataset.col;
      const byDefault = box.dataset.default === "1";
      choice.on.delete(key);
      choice.off.delete(key);
      if (box.checked && !byDefault) choice.on.add(key);
      if (!box.checked && byDefault) choice.off.add(key);
      saveChoice(scope, choice);
      showColumn(key, box.checked);
    });
  }
  document.getElementById("columns-reset").addEventListener("click", () => {
    choice = { on: new Set(), off: new Set() };
    saveChoice(scope, choice);
    apply(choice);
  });
}

document.addEventListener("DOMContentLoaded", setupColumns);
