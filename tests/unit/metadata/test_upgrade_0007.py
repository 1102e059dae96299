"""A SQLite store written by release 0007 opens, migrated, with every record kept."""

from __future__ import annotations

from pathlib import Path

from upgrade_0007 import check_deleted_references_dropped, check_upgraded, write_0007_store


def test_a_0007_store_is_upgraded_with_every_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    rows = write_0007_store(url)
    check_upgraded(url, rows)


def test_references_a_0007_store_left_dangling_are_dropped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    rows = write_0007_store(url, deleted=True)
    check_deleted_references_dropped(url, rows)


def test_downgrading_to_0007_gives_its_tables_back_with_the_records(tmp_path: Path) -> None:
    import sqlalchemy as sa
    from alembic import command

    from headwater.metadata import migrations

    url = f"sqlite:///{tmp_path / 'md.db'}"
    rows = write_0007_store(url)
    check_upgraded(url, rows)
    from headwater.metadata.sql import SqlMetadataStore

    with SqlMetadataStore(url) as store:  # its runs, the queued ones too, lose their experiment
        store.delete_experiment(rows["kfp_experiments"][0]["experiment_id"])
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            command.downgrade(migrations.alembic_config(conn), "0007_kfp_server")
        with engine.connect() as conn:
            count = {
                t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar()
                for t in ("kfp_runs", "kfp_experiments", "kfp_pipelines", "runs", "pipelines")
            }
            kept = conn.execute(sa.text("SELECT display_name, state FROM kfp_runs")).all()
    finally:
        engine.dispose()
    assert count == {
        "kfp_runs": 5,
        "kfp_experiments": 0,
        "kfp_pipelines": 1,
        "runs": 4,  # the queued and the canceled runs live in kfp_runs alone, as in 0007
        "pipelines": 2,
    }
    assert ("queued", "PENDING") in kept and ("canceled while queued", "CANCELED") in kept
