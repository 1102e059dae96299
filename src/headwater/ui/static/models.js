// The Models page: change a version's stage, or promote it to production, by posting JSON
// to the API (as launch.js does: same origin, the session cookie, application/json, which
// is all the server's BrowserGuard lets change anything), then show the registry again.
"use strict";

async function setStage(form, stage) {
  const error = form.querySelector(".stage-error");
  error.textContent = "";
  const url = `/api/v1/models/${encodeURIComponent(form.dataset.model)}/versions/${encodeURIComponent(form.dataset.version)}/stage`;
  for (const b of form.querySelectorAll("button")) b.disabled = true;
  try {
    const r = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ stage }),
    });
    const answer = await r.json();
    if (!r.ok) throw new Error(answer.error || r.statusText);
    location.reload();
  } catch (e) {
    error.textContent = e.message;
    for (const b of form.querySelectorAll("button")) b.disabled = false;
  }
}

function setupModels() {
  for (const form of document.querySelectorAll("form.stage-form")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      setStage(form, form.elements.stage.value);
    });
    const promote = form.querySelector("button.promote");
    if (promote) promote.addEventListener("click", () => setStage(form, "production"));
  }
}

document.addEventListener("DOMContentLoaded", setupModels);
