"""The web UI shows which image, and which runtime, ran a task (Chromium, with Podman)."""

from __future__ import annotations

import os
import shutil

import pytest
from cli_harness import Cli, run_ok
from container_images import image_id, needs_podman
from test_ui_cli import ui_server

pytestmark = [pytest.mark.integration, needs_podman]

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.path.exists(p)), None
)
if CHROMIUM is None:
    pytest.skip("no chromium browser (Debian package `chromium`)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")


def test_the_task_panel_names_the_image_and_runtime(headwater: Cli, busybox_image: str) -> None:
    result = run_ok(headwater.run("in_images", "--pipeline", "in-images", "--containers", "auto"))
    short = image_id(busybox_image)[:19]
    with ui_server(headwater) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(base_url=base)
            page.set_default_timeout(20_000)
            page.goto(f"/runs/{result['run_id']}")
            page.locator('svg#dag g.node[data-task="from-image"]').click()
            panel = page.locator("#task-panel")
            sync_api.expect(panel).to_contain_text(f"in image {busybox_image} ({short}) by podman")
            # A task that ran on the host says nothing of images.
            page.locator('svg#dag g.node[data-task="write-on-host"]').click()
            sync_api.expect(panel.locator("h2")).to_have_text("write-on-host")
            sync_api.expect(panel).not_to_contain_text("in image")
        finally:
            browser.close()
