// The Start a run page: upload a pipeline file (read here, posted as JSON, since the server
// takes no multipart forms) or choose an uploaded version, then post the typed parameters
// (and, with `headwater server`, the run's name and experiment) and open the new run's page.
"use strict";

async function postJSON(url, body) {
  const r = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await r.json();
  if (!r.ok) throw new Error(answer.error || r.statusText);
  return answer;
}

function fieldValue(field) {
  const kind = field.dataset.kind;
  if (kind === "bool") return field.checked;
  const text = field.value.trim();
  if (text === "" && kind !== "str") return undefined; // the pipeline's default applies
  if (kind === "int") return Number.parseInt(text, 10);
  if (kind === "float") return Number.parseFloat(text);
  if (kind === "list" || kind === "dict") {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${field.name}: not valid JSON (${e.message})`);
    }
  }
  return field.value;
}

function setupLaunch() {
  const upload = document.getElementById("upload");
  if (upload) {
    upload.addEventListener("change", async () => {
      const file = upload.files[0];
      if (!file) return;
      try {
        const found = await postJSON("/api/v1/pipelines", { content: await file.text(), filename: file.name });
        location.href = `/runs/new?path=${encodeURIComponent(found.path)}`;
      } catch (e) {
        alert(e.message);
      }
    });
  }
  const form = document.getElementById("launch-form");
  if (!form) return;
  const error = document.getElementById("launch-error");
  document.getElementById("launch").disabled = false; // disabled until this script has the form
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const button = document.getElementById("launch");
    try {
      const parameters = {};
      for (const field of form.querySelectorAll("[data-kind]")) {
        const value = fieldValue(field);
        if (value !== undefined) parameters[field.name] = value;
      }
      const body = form.dataset.version
        ? { pipeline_version_id: form.dataset.version, parameters }
        : { path: form.dataset.path, parameters };
      if (form.dataset.pipelineName) body.pipeline_name = form.dataset.pipelineName;
      // With `headwater server`: the run's name and experiment.
      const name = form.querySelector("[name=display_name]");
      if (name && name.value.trim()) body.display_name = name.value.trim();
      const experiment = form.querySelector("[name=experiment_id]");
      if (experiment && experiment.value) body.experiment_id = experiment.value;
      const chosen = experiment && experiment.selectedOptions[0];
      if (chosen && chosen.dataset.namespace) body.namespace = chosen.dataset.namespace;
      button.disabled = true;
      const started = await postJSON("/api/v1/runs", body);
      location.href = started.url;
    } catch (e) {
      error.textContent = e.message;
      button.disabled = false;
    }
  });
}

document.addEventListener("DOMContentLoaded", setupLaunch);
