"""`artifacts_of_many` answers exactly what `artifacts_of` does, for many executions at once."""

from __future__ import annotations

import time

from headwater.metadata import SqlMetadataStore
from headwater.metadata.base import ArtifactRecord, EventRecord, ExecutionRecord, RunRecord


def test_matches_artifacts_of_for_every_execution() -> None:
    store = SqlMetadataStore("sqlite://")
    store.create_run(RunRecord("r", "p", "v", "RUNNING", created_at=time.time()), ir={})
    ids = [
        store.record_execution(ExecutionRecord(run_id="r", task=f"t{i}", state="SUCCEEDED"))
        for i in range(3)
    ]
    art = [store.record_artifact(ArtifactRecord(uri=f"/a/{i}", producer=ids[i])) for i in range(3)]
    store.record_events(
        [
            EventRecord(ids[0], art[0], "OUTPUT", "out", 0),
            EventRecord(ids[1], art[0], "INPUT", "data", 0),
            EventRecord(ids[1], art[1], "OUTPUT", "out", 0),
            EventRecord(ids[1], art[2], "OUTPUT", "out", 1),
        ]
    )
    many = store.artifacts_of_many(ids)
    assert set(many) == set(ids)
    for execution_id in ids:
        assert many[execution_id] == store.artifacts_of(execution_id)
    assert [a.uri for _, a in many[ids[1]]] == ["/a/0", "/a/1", "/a/2"]
    assert many[ids[2]] == []
