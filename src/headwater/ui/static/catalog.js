// Experiments and recurring runs: archive or unarchive an experiment, enable or disable a
// recurring run (app.js's `postAction`: JSON posts to this server's own API), then show the
// page again.
"use strict";

function setupCatalog() {
  for (const button of document.querySelectorAll("button.archive")) {
    button.addEventListener("click", async () => {
      const verb = button.dataset.archived === "1" ? "unarchive" : "archive";
      try {
        await postAction(`/api/v1/experiments/${encodeURIComponent(button.dataset.experiment)}/${verb}`);
        location.reload();
      } catch (e) { alert(e.message); }
    });
  }
  for (const button of document.querySelectorAll("button.toggle-recurring")) {
    button.addEventListener("click", async () => {
      const verb = button.dataset.enabled === "1" ? "disable" : "enable";
      try {
        await postAction(`/api/v1/recurring-runs/${encodeURIComponent(button.dataset.recurring)}/${verb}`);
        location.reload();
      } catch (e) { alert(e.message); }
    });
  }
}

document.addEventListener("DOMContentLoaded", setupCatalog);
