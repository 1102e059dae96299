"""Other sites' pages against real `headwater serve` and `headwater ui` servers, in Debian's
headless Chromium (never a browser download) driven by Playwright.

The browser resolves evil.example, attacker.example and allowed.example to 127.0.0.1, so it
can (a) open a real server under a foreign name, as DNS rebinding does, and (b) open an
attacker's page served by a second, plain HTTP server that posts to the real servers
across sites, as a `no-cors` fetch of `text/plain` and as a form submission. Each attack
aims at code running on the server: an admin load of a handler file, or an upload of a
pipeline file, that writes a marker file when imported. No marker may appear, and the same
request from a client that is not a browser (httpx, JSON, no token, loopback) still works.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli
from test_ui_cli import free_port, ui_server

pytestmark = [pytest.mark.integration]

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.path.exists(p)), None
)
if CHROMIUM is None:
    pytest.skip("no chromium browser (Debian package `chromium`)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")
pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from test_serve_cli import serving  # noqa: E402 - after the skips: it needs the serve extra

expect = sync_api.expect
TIMEOUT_MS = 20_000
NAMES = ("evil.example", "attacker.example", "allowed.example")
RESOLVE = "--host-resolver-rules=" + ", ".join(f"MAP {name} 127.0.0.1" for name in NAMES)

HANDLER = """
import pathlib

pathlib.Path({marker!r}).write_text("ran")


class Marker:
    def predict(self, inputs):
        return [1.0 for _ in next(iter(inputs.values()))]
"""

BASE = """
class Marker:
    def predict(self, inputs):
        return [1.0 for _ in next(iter(inputs.values()))]
"""

PIPELINE = """
import pathlib

from kfp import dsl

pathlib.Path({marker!r}).write_text("ran")


@dsl.component
def noop() -> str:
    return "ok"


@dsl.pipeline(name="marker")
def marker():
    noop()
"""


class Site:
    """The files of this module's attacks: code that marks when it runs, and attack pages."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pages = root / "pages"
        self.pages.mkdir()

    def marker(self, name: str) -> Path:
        return self.root / f"{name}.ran"

    def handler(self, name: str) -> str:
        """A handler spec (`file.py:Marker`) whose import writes the marker `name`."""
        path = self.root / f"handler_{name.replace('-', '_')}.py"
        path.write_text(HANDLER.format(marker=str(self.marker(name))))
        return f"{path}:Marker"

    def pipeline(self, name: str) -> str:
        """Pipeline source whose import writes the marker `name`."""
        return PIPELINE.format(marker=str(self.marker(name)))

    def page(self, name: str, html: str) -> str:
        (self.pages / name).write_text(f"<!doctype html><html><body>{html}</body></html>")
        return name


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return Site(tmp_path_factory.mktemp("cross-site"))


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """The CLI with its own HEADWATER_HOME, shared by this module's servers."""
    root = tmp_path_factory.mktemp("cross-site-cli")
    (root / "cwd").mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "home")}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "HEADWATER_TOKEN"):
        env.pop(name, None)
    return Cli(root / "home", root / "cwd", env)


@pytest.fixture(scope="module")
def serve_url(cli: Cli, site: Site) -> Iterator[str]:
    """`headwater serve` on loopback, token-less, also answering to allowed.example."""
    base = site.root / "base.py"
    base.write_text(BASE)
    with serving(cli, f"base={base}:Marker", "--allow-host", "allowed.example") as (url, _):
        yield url


@pytest.fixture(scope="module")
def ui_url(cli: Cli) -> Iterator[str]:
    with ui_server(cli) as url:
        yield url


@pytest.fixture(scope="module")
def attacker(site: Site) -> Iterator[str]:
    """A plain HTTP server of the attacker's pages; its URL under attacker.example."""

    class Pages(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test's output clean

    handler = functools.partial(Pages, directory=site.pages)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://attacker.example:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", RESOLVE])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _fetch_no_cors(url: str, body: str) -> str:
    """Script: a POST no page may read the answer of, but which a server may still act on;
    the page's title says "sent" once the server has answered."""
    return (
        f"<script>fetch({json.dumps(url)}, {{mode: 'no-cors', method: 'POST', "
        f"headers: {{'Content-Type': 'text/plain'}}, body: {json.dumps(body)}}})"
        ".finally(() => { document.title = 'sent'; });</script>"
    )


def _attack(page: Any, url: str) -> str:
    """Open the attack page at `url`, wait for its fetch, submit its form; the form's answer."""
    page.goto(url)
    expect(page).to_have_title("sent", timeout=TIMEOUT_MS)
    with page.expect_navigation():
        page.evaluate("document.forms[0].submit()")
    return str(page.inner_text("body"))


def test_another_sites_page_cannot_load_a_model(
    page: Any, serve_url: str, attacker: str, site: Site
) -> None:
    fetched, posted, curl = (site.handler(n) for n in ("fetch", "form", "curl"))
    # A text/plain form that sends JSON: its one field is named '{"model": "...", "version": "'
    # and its value '"}', which the browser joins with '=' into {"model": ..., "version": "="}.
    field = json.dumps({"model": posted, "version": ""})[:-2]
    form = (
        f'<form method="post" enctype="text/plain" action="{serve_url}/admin/models/form/load">'
        f"<input name='{field}' value='\"}}'></form>"
        + _fetch_no_cors(f"{serve_url}/admin/models/fetch/load", json.dumps({"model": fetched}))
    )
    answer = _attack(page, f"{attacker}/{site.page('serve.html', form)}")

    assert not site.marker("fetch").exists() and not site.marker("form").exists()
    assert "cross-site request refused: POST from Origin 'http://attacker.example:" in answer
    served = httpx.get(f"{serve_url}/v1/models").json()["models"]
    assert "fetch" not in served and "form" not in served
    loaded = httpx.post(f"{serve_url}/admin/models/curl/load", json={"model": curl})
    assert loaded.status_code == 200, loaded.text
    assert site.marker("curl").read_text() == "ran"


def test_another_sites_page_cannot_run_an_upload_in_the_ui(
    page: Any, ui_url: str, attacker: str, site: Site
) -> None:
    upload = {"content": site.pipeline("ui-fetch"), "filename": "attack.py"}
    form = (
        f'<form method="post" enctype="multipart/form-data" action="{ui_url}/api/v1/runs">'
        f'<textarea name="content">{html.escape(site.pipeline("ui-form"))}</textarea>'
        '<input name="filename" value="attack.py"></form>'
        + _fetch_no_cors(f"{ui_url}/api/v1/pipelines", json.dumps(upload))
    )
    answer = _attack(page, f"{attacker}/{site.page('ui.html', form)}")

    assert not site.marker("ui-fetch").exists() and not site.marker("ui-form").exists()
    assert "cross-site request refused: POST from Origin 'http://attacker.example:" in answer
    upload = {"content": site.pipeline("ui-curl"), "filename": "curl.py"}
    read = httpx.post(f"{ui_url}/api/v1/pipelines", json=upload, timeout=30)
    assert read.status_code == 200 and read.json()["pipeline"] == "marker", read.text
    assert site.marker("ui-curl").read_text() == "ran"


@pytest.mark.parametrize("server", ["serve", "ui"])
def test_a_server_opened_under_a_foreign_name_is_refused(
    page: Any, server: str, serve_url: str, ui_url: str, site: Site
) -> None:
    marker = f"rebind-{server}"
    if server == "serve":
        base, shown, path = serve_url, "/v1/models", "/admin/models/rebound/load"
        body: dict[str, str] = {"model": site.handler(marker)}
    else:
        base, shown, path = ui_url, "/", "/api/v1/pipelines"
        body = {"content": site.pipeline(marker), "filename": "rebound.py"}
    port = base.rpartition(":")[2]

    opened = page.goto(f"http://evil.example:{port}{shown}")
    # The page is evil.example's now: its script posts JSON to the server as same-origin.
    status, text = page.evaluate(
        """async ([path, body]) => {
            const r = await fetch(path, {method: "POST", body: JSON.stringify(body),
                                         headers: {"Content-Type": "application/json"}});
            return [r.status, await r.text()];
        }""",
        [path, body],
    )

    assert not site.marker(marker).exists()
    assert status == 403 and "start it with --allow-host evil.example" in text
    assert opened.status == 403
    assert f"Host 'evil.example:{port}' is not a name of this server" in page.inner_text("body")


def test_an_allowed_host_is_served_and_its_own_pages_may_post(
    page: Any, serve_url: str, site: Site
) -> None:
    port = serve_url.rpartition(":")[2]
    opened = page.goto(f"http://allowed.example:{port}/v1/models")
    status = page.evaluate(
        """async (body) => (await fetch("/admin/models/allowed/load", {method: "POST",
            headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})).status""",
        {"model": site.handler("allowed")},
    )
    assert opened.status == 200 and json.loads(page.inner_text("body"))["models"][0] == "base"
    assert status == 200
    assert site.marker("allowed").read_text() == "ran"
