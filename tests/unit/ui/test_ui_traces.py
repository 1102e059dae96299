"""Profiler traces on the Artifact page: listed, downloadable, and kept inside the artifact.

The trace is a real one: a pipeline task profiles a tiny torch step with
`headwater.components.torch.profiling.StepProfile`, as the PyTorch training component does.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from ui_harness import Store, call

import headwater

pytest.importorskip("torch", reason="the profiler trace is made with torch")

PROFILE = str(Path(__file__).parent / "pipelines" / "ui_profile.py")


@pytest.fixture(scope="module")
def profiled(store: Store) -> dict[str, headwater.ArtifactInfo]:
    """The trace folder and the summary page of a run of the profiling pipeline."""
    done = headwater.run(PROFILE)
    assert done.state == "SUCCEEDED"
    [task] = headwater.get_run(done.run_id).tasks
    return {slot: headwater.get_artifact(uris[0]) for slot, uris in task.output_artifacts.items()}


def test_trace_artifact_lists_its_trace_with_a_download(
    profiled: dict[str, headwater.ArtifactInfo],
) -> None:
    art = profiled["profile_trace"]
    body = call("GET", f"/api/v1/artifacts/{art.id}").json()
    on_disk = Path(art.uri) / "trace.json.gz"
    assert body["traces"] == [
        {
            "name": "trace.json.gz",
            "size": on_disk.stat().st_size,
            "url": f"/api/v1/artifacts/{art.id}/traces/trace.json.gz",
            "artifact_id": art.id,
        }
    ]
    download = call("GET", body["traces"][0]["url"])
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/gzip"
    assert "content-encoding" not in download.headers  # the browser must not unpack it
    disposition = download.headers["content-disposition"]
    assert disposition.startswith("attachment") and 'filename="trace.json.gz"' in disposition
    assert download.content == on_disk.read_bytes()
    events = json.loads(gzip.decompress(download.content))["traceEvents"]
    assert any(str(e.get("name", "")).startswith("aten::") for e in events)


def test_artifact_page_offers_the_download_and_how_to_open_it(
    profiled: dict[str, headwater.ArtifactInfo],
) -> None:
    trace, summary = profiled["profile_trace"], profiled["profile_summary"]
    link = f'href="/api/v1/artifacts/{trace.id}/traces/trace.json.gz"'
    page = call("GET", f"/artifacts/{trace.id}").text
    assert "Profiler traces" in page and link in page
    assert "chrome://tracing" in page and "ui.perfetto.dev" in page
    # The summary page, a sibling output of the same task, links the same trace.
    body = call("GET", f"/api/v1/artifacts/{summary.id}").json()
    assert [t["artifact_id"] for t in body["traces"]] == [trace.id]
    assert link in call("GET", f"/artifacts/{summary.id}").text


@pytest.mark.parametrize(
    "name",
    [
        "secret.trace.json",
        "..%2Fbeside.trace.json",
        "..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "notes.txt",
        "nope.trace.json.gz",
    ],
    ids=["symlink-out", "dot-dot-trace", "dot-dot-passwd", "not-a-trace", "missing"],
)
def test_a_trace_outside_the_artifact_is_a_404(
    profiled: dict[str, headwater.ArtifactInfo], tmp_path: Path, name: str
) -> None:
    art = profiled["profile_trace"]
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": "top secret"}')
    planted = Path(art.uri) / "secret.trace.json"
    planted.unlink(missing_ok=True)
    planted.symlink_to(secret)  # a link planted in the artifact must not lead out of it
    (Path(art.uri) / "notes.txt").write_text("not a trace")
    # In the artifact store, but not in this artifact.
    (Path(art.uri).parent / "beside.trace.json").write_text('{"secret": "top secret"}')
    listed = call("GET", f"/api/v1/artifacts/{art.id}").json()["traces"]
    assert [t["name"] for t in listed] == ["trace.json.gz"]
    response = call("GET", f"/api/v1/artifacts/{art.id}/traces/{name}")
    assert response.status_code == 404 and set(response.json()) == {"error"}
    assert "top secret" not in response.text and "root:" not in response.text
