"""Links a sandboxed task leaves: those out of its own paths are removed, the rest kept."""

from __future__ import annotations

import os
from pathlib import Path

from headwater.logs import open_attempt
from headwater.sandbox.links import remove_escapes


def test_links_out_of_the_tasks_own_paths_are_removed(tmp_path: Path) -> None:
    own, given, elsewhere = tmp_path / "own", tmp_path / "input", tmp_path / "secret"
    (own / "sub").mkdir(parents=True)
    given.write_text("in")
    elsewhere.write_text("s")
    (own / "to-input").symlink_to(given)
    (own / "sub" / "sibling").symlink_to("../to-input")
    (own / "out").symlink_to(elsewhere)
    (own / "sub" / "up").symlink_to("../../secret")
    (own / "etc").symlink_to("/etc")
    (own / "dangling").symlink_to("/nowhere/at/all")
    removed = remove_escapes([str(own)], [str(own), str(given)])
    assert sorted(Path(p).name for p in removed) == ["dangling", "etc", "out", "up"]
    assert (own / "to-input").is_symlink() and (own / "sub" / "sibling").is_symlink()
    assert elsewhere.read_text() == "s"


def test_a_root_that_is_a_link_is_removed(tmp_path: Path) -> None:
    (tmp_path / "outputs").symlink_to("/etc")
    assert remove_escapes([str(tmp_path / "outputs")], [str(tmp_path)]) == [
        str(tmp_path / "outputs")
    ]


def test_a_log_that_is_a_link_is_replaced_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "not-a-log"
    target.write_text("kept")
    log = tmp_path / "log.txt"
    log.symlink_to(target)
    opened = open_attempt(str(log), 2, None)
    try:
        opened.write(b"task output\n")
    finally:
        os.close(opened.fd)
    assert target.read_text() == "kept" and not log.is_symlink()
    assert log.read_bytes() == b"task output\n"
