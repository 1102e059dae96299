"""A store written by release 0007 (`data/store_0007.json`: every row of a real store that the
0007 server and `headwater run` wrote, with the real `kfp.Client`), upgraded to the head.

Shared by the SQLite unit test and the PostgreSQL integration test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from headwater.metadata import migrations, schema
from headwater.metadata.sql import SqlMetadataStore

DUMP = Path(__file__).parent / "data" / "store_0007.json"
#: What the 0007 store held, by run name (the CLI run has none).
EXPECTED = {
    "": ("SUCCEEDED", 0),
    "inline run": ("SUCCEEDED", 1),
    "by version": ("SUCCEEDED", 1),
    "held": ("SUCCEEDED", 1),
    "queued": ("QUEUED", 0),
    "canceled while queued": ("CANCELED", 0),
}


def write_0007_store(url: str, *, deleted: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Migrate an empty database at `url` to 0007 and load the dump's rows into it; with
    `deleted`, without its experiment and its uploaded version "v2", which 0007 deleted and
    left runs and the recurring run naming (it had no foreign keys)."""
    rows: dict[str, list[dict[str, Any]]] = json.loads(DUMP.read_text())
    if deleted:
        rows["kfp_experiments"] = []
        versions = rows["kfp_pipeline_versions"]
        rows["kfp_pipeline_versions"] = [v for v in versions if v["display_name"] != "v2"]
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrations.alembic_config(conn), "0007_kfp_server")
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.begin() as conn:
            for table in meta.sorted_tables:
                if table.name == "alembic_version" or not rows.get(table.name):
                    continue
                json_columns = {c.name for c in table.columns if isinstance(c.type, sa.JSON)}
                for name in json_columns:  # as 0007 declared them: None is SQL NULL
                    table.c[name].type = sa.JSON(none_as_null=True)
                loaded = [
                    {k: json.loads(v) if k in json_columns and v is not None else v
                     for k, v in row.items()}
                    for row in rows[table.name]
                ]  # fmt: skip
                conn.execute(table.insert(), loaded)
    finally:
        engine.dispose()
    return rows


def check_upgraded(url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Open the 0007 store with this release (which migrates it) and check that every record
    came through: runs (queued and canceled ones included), experiments, pipelines and their
    versions with their ids, the recurring run, and every execution."""
    with SqlMetadataStore(url) as store:
        runs = {r.display_name: r for r in store.list_runs()}
        assert {n: (r.state, r.starts) for n, r in runs.items()} == EXPECTED
        experiment = rows["kfp_experiments"][0]
        named = rows["kfp_pipelines"][0]
        assert store.get_experiment(experiment["experiment_id"]).display_name == "team-a"  # type: ignore[union-attr]
        assert {r.experiment for n, r in runs.items() if n} == {"team-a"}
        assert runs[""].experiment_id is None and runs[""].pipeline == "adder"
        queued = runs["queued"]
        assert queued.parameters == {"x": 11} and queued.namespace == ""
        uploaded = {v["display_name"]: v for v in rows["kfp_pipeline_versions"]}
        by_version = runs["by version"]
        assert by_version.pipeline_version_id == uploaded["v2"]["pipeline_version_id"]
        assert by_version.pipeline_id == named["pipeline_id"]
        assert by_version.version_name == "v2"
        pipeline = store.get_pipeline(named["pipeline_id"])
        assert pipeline is not None and pipeline.display_name == "adder-uploaded"
        for version in uploaded.values():
            found = store.get_version(version["pipeline_version_id"])
            assert found is not None and found.pipeline_id == named["pipeline_id"]
            assert found.ir["pipelineInfo"]["name"] == "adder"
        for run in runs.values():
            ir = store.get_pipeline_ir(run.run_id)
            assert ir is not None and ir["pipelineInfo"]["name"] == run.pipeline
        # The inline runs of one IR share one version; the CLI run's IR is the same too.
        assert runs["inline run"].pipeline_version_id == runs["queued"].pipeline_version_id
        recurring = store.get_recurring_run(rows["kfp_recurring_runs"][0]["recurring_run_id"])
        assert recurring is not None and recurring.status == "DISABLED"
        assert recurring.pipeline_version_id == uploaded["v2"]["pipeline_version_id"]
        executions = sum(len(store.list_executions(r.run_id)) for r in runs.values())
        assert executions == len(rows["executions"])
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, schema.METADATA) == []
            tables = set(sa.inspect(conn).get_table_names())
            assert not {t for t in tables if t.startswith("kfp_")}
    finally:
        engine.dispose()


def check_deleted_references_dropped(url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """A 0007 store whose experiment and version "v2" were deleted opens, migrated: its runs
    are kept without the experiment, the run of "v2" with the version it ran, and the
    recurring run of "v2", which could never fire, is not kept."""
    with SqlMetadataStore(url) as store:
        runs = {r.display_name: r for r in store.list_runs()}
        assert {n: (r.state, r.starts) for n, r in runs.items()} == EXPECTED
        assert all(r.experiment_id is None for r in runs.values())
        by_version = runs["by version"]
        assert by_version.pipeline_id is None and by_version.pipeline == "adder"
        assert by_version.pipeline_version_id == runs["inline run"].pipeline_version_id
        assert store.get_recurring_run(rows["kfp_recurring_runs"][0]["recurring_run_id"]) is None
