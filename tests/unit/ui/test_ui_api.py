"""The JSON API under /api/v1 on a store filled by real runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from ui_harness import PIPELINE, Store, call

import headwater
from headwater.logs import TAIL_BYTES


def test_runs_newest_first_with_metrics_and_durations(store: Store) -> None:
    body = call("GET", "/api/v1/runs").json()
    assert [r["run_id"] for r in body["runs"]] == [store.failed, store.ok, store.first]
    first = body["runs"][2]
    assert first["pipeline"] == "ui-demo" and first["state"] == "SUCCEEDED"
    assert first["metrics"] == {"accuracy": 0.5, "rows": 3.0}
    assert first["duration_s"] >= 0 and first["created_at"].endswith("Z")
    assert body["metrics"] == ["accuracy", "rows"] and body["next_offset"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=FAILED", ["failed"]),
        ("state=succeeded", ["ok", "first"]),
        ("pipeline=ui-demo&limit=1", ["failed"]),
        ("pipeline=other", []),
        ("q=UI-DE&offset=1", ["ok", "first"]),
        ("q=nothing-like-this", []),
    ],
    ids=["state", "state-any-case", "pipeline", "other-pipeline", "text", "text-none"],
)
def test_runs_filters(store: Store, query: str, expected: list[str]) -> None:
    body = call("GET", f"/api/v1/runs?{query}").json()
    assert [r["run_id"] for r in body["runs"]] == [getattr(store, n) for n in expected]


def test_runs_text_filter_matches_a_run_id_prefix(store: Store) -> None:
    body = call("GET", f"/api/v1/runs?q={store.ok[:6]}").json()
    assert [r["run_id"] for r in body["runs"]] == [store.ok]


def test_runs_pagination_walks_every_run_once(store: Store) -> None:
    seen, offset = [], 0
    while offset is not None:
        body = call("GET", f"/api/v1/runs?limit=2&offset={offset}").json()
        seen += [r["run_id"] for r in body["runs"]]
        offset = body["next_offset"]
    assert seen == [store.failed, store.ok, store.first]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=x", "offset=-1", "state=BOGUS"], ids=["zero", "nan", "neg", "state"]
)
def test_bad_runs_query_is_a_json_400(store: Store, query: str) -> None:
    response = call("GET", f"/api/v1/runs?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {"error"} and "Traceback" not in response.text


def test_run_detail_has_tasks_and_graph(store: Store) -> None:
    body = call("GET", f"/api/v1/runs/{store.failed[:8]}").json()
    assert body["run_id"] == store.failed and body["state"] == "FAILED"
    tasks = {t["name"]: t for t in body["tasks"]}
    assert tasks["make-data"]["cached"] and tasks["evaluate"]["state"] == "CACHED"
    assert tasks["fail"]["error"]["message"] == "boom on purpose"
    assert (
        tasks["fail"]["artifacts"]["inputs"]["data"]
        == tasks["make-data"]["artifacts"]["outputs"]["data"]
    )
    assert tasks["fail"]["duration_s"] is not None
    graph = body["graph"]
    layers = {n["name"]: n["layer"] for n in graph["nodes"]}
    assert layers == {"make-data": 0, "evaluate": 1, "fail": 1}
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {
        ("make-data", "evaluate"),
        ("make-data", "fail"),
    }


def test_unknown_run_is_a_json_404(store: Store) -> None:
    for method, path in [
        ("GET", "/api/v1/runs/no-such-run"),
        ("DELETE", "/api/v1/runs/no-such-run"),
        ("GET", "/api/v1/runs/no-such-run/tasks/x/log"),
        ("GET", "/api/v1/artifacts/999999"),
        ("GET", "/api/v1/lineage/999999"),
    ]:
        response = call(method, path)
        assert response.status_code == 404, path
        assert set(response.json()) == {"error"}


def test_log_tail_and_full_download(store: Store) -> None:
    base = f"/api/v1/runs/{store.ok}/tasks/evaluate/log"
    full = call("GET", f"{base}?download=true")
    assert "log line 0" in full.text and "log line 4" in full.text
    tail = call("GET", f"{base}?tail=2")
    assert tail.status_code == 200 and tail.text.splitlines() == full.text.splitlines()[-2:]
    assert full.headers["content-disposition"].startswith("attachment")
    missing = call("GET", f"/api/v1/runs/{store.ok}/tasks/nope/log")
    assert missing.status_code == 404 and "evaluate" in missing.json()["error"]


def test_the_tail_of_a_log_of_one_huge_line_is_its_bounded_end(store: Store) -> None:
    [task] = [t for t in headwater.get_run(store.ok).tasks if t.name == "evaluate"]
    log = Path(task.log_path)
    kept = log.read_bytes()
    line = b"".join(b"%09d," % i for i in range(1_000_000))  # one 10 MB line, no newline
    try:
        log.write_bytes(kept + line)
        tail = call("GET", f"/api/v1/runs/{store.ok}/tasks/evaluate/log?tail=200")
    finally:
        log.write_bytes(kept)
    assert tail.status_code == 200
    first, end = tail.text.split("\n", 1)
    assert first.startswith("[headwater: the last 1024 KiB of this log")
    assert end.encode() == line[-TAIL_BYTES:] + b"\n"


def outputs(store: Store, run_id: str, task: str) -> dict[str, str]:
    run = headwater.get_run(run_id)
    [found] = [t for t in run.tasks if t.name == task]
    return {k: v[0] for k, v in found.output_artifacts.items()}


def test_classification_metrics_preview(store: Store) -> None:
    uri = outputs(store, store.ok, "evaluate")["classification"]
    body = call("GET", f"/api/v1/artifacts/{headwater.get_artifact(uri).id}").json()
    assert body["type"] == "system.ClassificationMetrics"
    preview = body["preview"]
    assert preview["confusion_matrix"] == {"labels": ["cat", "dog"], "rows": [[8, 2], [1, 9]]}
    assert [(p["fpr"], p["tpr"]) for p in preview["roc"]] == [(0, 0), (0.25, 0.75), (1, 1)]


def test_metrics_markdown_html_and_table_previews(store: Store) -> None:
    arts = outputs(store, store.ok, "evaluate") | outputs(store, store.ok, "make-data")

    def preview(name: str) -> dict[str, object]:
        response = call("GET", f"/api/v1/artifacts/{arts[name]}")
        assert response.status_code == 200, response.text
        return dict(response.json()["preview"])

    assert preview("metrics") == {"kind": "metrics", "rows": [["accuracy", 0.75], ["rows", 4]]}
    markdown = preview("notes")
    assert "<strong>bold</strong>" in str(markdown["html"])
    assert "<script" not in str(markdown["html"]) and "alert" not in str(markdown["html"])
    assert "javascript:" not in str(markdown["html"]) and 'href="https://example.org"' in str(
        markdown["html"]
    )
    assert preview("page")["kind"] == "html"
    csv = preview("data")
    assert csv["format"] == "csv" and csv["rows"] == [
        ["0", "0"],
        ["1", "1"],
        ["2", "4"],
        ["3", "9"],
    ]
    parquet = preview("table")
    assert parquet["format"] == "parquet" and parquet["total_rows"] == 40
    assert [c["name"] for c in parquet["columns"]] == ["x", "name"]  # type: ignore[union-attr]
    # Only the first row group (7 rows) is read.
    assert parquet["rows"] == [[i, f"n{i}"] for i in range(7)]


def test_artifact_outside_the_store_is_refused(store: Store, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    path = Path(outputs(store, store.first, "evaluate")["notes"])
    path.unlink()
    path.symlink_to(secret)  # a link planted in the store must not lead out of it
    response = call("GET", f"/api/v1/artifacts/{path}")
    assert response.status_code == 400
    assert "outside the artifact store" in response.json()["error"]
    assert "top secret" not in response.text


def test_lineage_with_hops_and_limit(store: Store) -> None:
    uri = outputs(store, store.ok, "make-data")["data"]
    full = call("GET", f"/api/v1/lineage/{uri}?hops=1").json()
    tasks = {n.get("task") for n in full["nodes"] if n["kind"] == "execution"}
    assert {"make-data", "evaluate", "fail"} <= tasks and not full["truncated"]
    cut = call("GET", f"/api/v1/lineage/{uri}?hops=1&limit=2").json()
    assert len(cut["nodes"]) == 2 and cut["truncated"]
    ids = {n["id"] for n in cut["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids for e in cut["edges"])


def test_compare_marks_differences(store: Store) -> None:
    body = call("GET", f"/api/v1/compare?runs={store.first},{store.ok}").json()
    params = {r["name"]: r for r in body["parameters"]}
    assert params["rows"]["values"] == [3, 4] and params["rows"]["differs"]
    assert not params["broken"]["differs"]
    metrics = {r["name"]: r["differs"] for r in body["metrics"]}
    assert metrics == {"accuracy": True, "rows": True}
    assert [c["name"].split()[0] for c in body["roc"]] == [store.first[:8], store.ok[:8]]
    assert call("GET", f"/api/v1/compare?runs={store.ok}").status_code == 400


def test_delete_run_answers_its_full_id_and_the_artifacts_deleted(store: Store) -> None:
    extra = headwater.run(PIPELINE, {"rows": 5, "threshold": 0.1})
    made = {
        uri
        for task in headwater.get_run(extra.run_id).tasks
        for uris in task.output_artifacts.values()
        for uri in uris
    }
    response = call("DELETE", f"/api/v1/runs/{extra.run_id[:12]}")  # a unique prefix
    assert response.status_code == 200
    body = response.json()
    assert body["run_id"] == extra.run_id
    assert made and set(body["artifact_uris"]) == made  # no other run used them
    assert call("GET", f"/api/v1/runs/{extra.run_id}").status_code == 404


def test_openapi_documents_the_api(store: Store) -> None:
    spec = call("GET", "/api/v1/openapi.json").json()
    assert {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/graph",
        "/api/v1/artifacts/{ref}",
        "/api/v1/artifacts/{artifact_id}/traces/{name}",
    } <= set(spec["paths"])
    assert not any(p.startswith("/runs") for p in spec["paths"])  # pages are not the API


def test_runs_page_of_a_big_store_is_one_quick_query(store: Store) -> None:
    started = time.perf_counter()
    call("GET", "/api/v1/runs?limit=50&offset=1")
    assert time.perf_counter() - started < 2
