"""A SQLite store written by release 0007 opens, migrated, with every record kept."""

from __future__ import annotations

from pathlib import Path

from upgrade_0007 import check_upgraded, write_0007_store


def test_a_0007_store_is_upgraded_with_every_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    rows = write_0007_store(url)
    check_upgraded(url, rows)
