"""`-v` streaming of task logs: whole lines, in order, in bounded reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.cli import progress
from headwater.cli.progress import _LogFollower


def read_all(follower: _LogFollower, *, final: bool) -> list[str]:
    return [line for lines in follower.read(final=final) for line in lines]


def test_lines_come_whole_and_in_order_across_reads(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    follower = _LogFollower(str(log))
    log.write_bytes(b"one\ntw")

    assert read_all(follower, final=False) == ["one"]  # "tw" waits for its end
    with log.open("ab") as fh:
        fh.write(b"o\nthree")
    assert read_all(follower, final=False) == ["two"]
    assert read_all(follower, final=True) == ["three"]  # the task ended: the rest, unended
    assert read_all(follower, final=True) == []


def test_a_running_task_is_read_a_budget_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "STREAM_CHUNK", 16)
    monkeypatch.setattr(progress, "STREAM_TICK_BUDGET", 32)
    log = tmp_path / "log.txt"
    lines = [f"line {i:03d}" for i in range(20)]  # 9 bytes a line with its newline
    follower = _LogFollower(str(log))
    log.write_text("".join(f"{line}\n" for line in lines))

    first = read_all(follower, final=False)
    assert first == lines[: len(first)] and 0 < len(first) < len(lines)
    assert first + read_all(follower, final=True) == lines


def test_a_line_longer_than_a_chunk_comes_in_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "STREAM_CHUNK", 8)
    log = tmp_path / "log.txt"
    follower = _LogFollower(str(log))
    log.write_text("x" * 20 + "\nend\n")

    pieces = read_all(follower, final=True)

    assert "".join(pieces[:-1]) == "x" * 20
    assert all(len(p) <= 16 for p in pieces)  # at most a chunk and the one before it
    assert pieces[-1] == "end"


def test_a_retry_is_followed_from_where_the_earlier_attempts_output_ends(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.txt"
    log.write_text("attempt 1\n")  # streamed while attempt 1 ran
    follower = _LogFollower(str(log))
    with log.open("a") as fh:
        fh.write("attempt 2\n")
    assert read_all(follower, final=True) == ["attempt 2"]


def test_a_missing_log_reads_as_nothing(tmp_path: Path) -> None:
    assert read_all(_LogFollower(str(tmp_path / "none.txt")), final=True) == []
