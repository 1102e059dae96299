"""Task logs of any size: a capped log keeps its first and last parts and marks the cut; a tail
reads a bounded number of bytes from the end; a follower of a capped log keeps its place."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from headwater.cli.progress import _LogFollower
from headwater.logs import MARKER_LEN, TAIL_BYTES, CappedLog, appending, tail_lines

LIMIT = 64 * 1024


def numbered(start: int, count: int) -> bytes:
    return b"".join(b"line %09d %s\n" % (i, b"x" * 40) for i in range(start, start + count))


def capped(path: Path, limit: int = LIMIT) -> tuple[CappedLog, int]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return CappedLog(str(path), fd, limit), fd


def follow(log: CappedLog, fd: int, follower: _LogFollower, chunks: list[bytes]) -> list[str]:
    """Write `chunks` to `log`, the follower reading after each; then close it and read the
    rest: every line the follower handed out."""
    seen: list[str] = []
    for chunk in chunks:
        log.write(chunk)
        for lines in follower.read(final=False):
            seen.extend(lines)
    os.close(fd)
    for lines in follower.read(final=True):
        seen.extend(lines)
    return seen


def line_numbers(seen: list[str]) -> list[int]:
    return [int(m[1]) for line in seen if (m := re.fullmatch(r"line (\d{9}) x{40}", line))]


def test_a_capped_log_keeps_its_start_its_end_and_says_how_much_was_cut(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.txt"
    log, fd = capped(path)
    stream = numbered(0, 20_000)  # 1 MB through a 64 KiB cap, in uneven writes
    for at in range(0, len(stream), 7_777):
        log.write(stream[at : at + 7_777])
        assert path.stat().st_size <= LIMIT
    os.close(fd)

    kept = path.read_bytes()
    head, marker, tail = (
        kept[: LIMIT // 2],
        kept[LIMIT // 2 : LIMIT // 2 + MARKER_LEN],
        kept[LIMIT // 2 + MARKER_LEN :],
    )
    assert stream.startswith(head) and stream.endswith(tail)
    cut = int(re.search(rb"([0-9,]+) bytes of output cut here", marker)[1].replace(b",", b""))
    assert len(head) + cut + len(tail) == len(stream)  # every byte is kept or counted


def test_a_later_attempt_goes_on_counting_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    first = numbered(0, 5_000)
    with appending(str(path), 1, LIMIT) as write:
        write(first)
    second = numbered(5_000, 5_000)
    with appending(str(path), 2, LIMIT) as write:
        write(second)

    text = path.read_bytes()
    assert len(text) <= LIMIT and text.startswith(first[: LIMIT // 2])
    assert text.endswith(second[-1000:])
    counts = re.findall(rb"([0-9,]+) bytes of output cut here", text)
    assert len(counts) == 1  # one marker, for both attempts
    # The second attempt's own marker line was written into the log, then partly cut.
    assert int(counts[0].replace(b",", b"")) > len(first) - LIMIT // 2


def test_no_cap_and_no_earlier_output_add_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    stream = numbered(0, 5_000)
    with appending(str(path), 1, None) as write:
        write(stream)
    assert path.read_bytes() == stream
    with pytest.raises(ValueError, match="at least"):
        capped(tmp_path / "small.txt", limit=100)


def test_a_tail_of_one_long_line_reads_a_bounded_end(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    line = b"".join(b"%09d," % i for i in range(800_000))  # one 8 MB line
    path.write_bytes(b"first\n" + line)
    kept, short = tail_lines(path, 200)
    assert short and len(kept) == 1
    assert kept[0].encode() == line[-TAIL_BYTES:]


def test_a_tail_returns_the_last_lines_exactly(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    stream = numbered(0, 50_000)
    path.write_bytes(stream)
    kept, short = tail_lines(path, 3)
    assert not short and kept == stream.decode().splitlines()[-3:]
    path.write_bytes(b"a\nb\n")
    assert tail_lines(path, 10) == (["a", "b"], False)


# Bytes written between reads: a follower that keeps up misses nothing; one that falls behind
# says how much was cut before it read it.
@pytest.mark.parametrize(("between", "misses"), [(3_000, False), (30_000, True), (100_000, True)])
def test_a_follower_of_a_capped_log_keeps_its_place_through_rotations(
    tmp_path: Path, between: int, misses: bool
) -> None:
    path = tmp_path / "log.txt"
    log, fd = capped(path)
    follower = _LogFollower(str(path), LIMIT)
    stream = numbered(0, 20_000)
    chunks = [stream[at : at + between] for at in range(0, len(stream), between)]
    seen = follow(log, fd, follower, chunks)

    numbers = line_numbers(seen)
    assert numbers == sorted(numbers) and numbers[-1] == 19_999  # in order, to the end
    notes = [line for line in seen if "cut here" in line]
    assert bool(notes) == misses
    assert all(line.startswith("===== headwater: ") for line in notes)
    # What the follower passed on and what it says was cut add up to the whole stream.
    cut = sum(int(re.search(r"([0-9,]+) (more )?bytes", n)[1].replace(",", "")) for n in notes)
    shown = sum(len(line) + 1 for line in seen if line not in notes)
    # (but for a line end counted where a cut split a line, and the marker's own line break)
    assert abs(shown + cut - len(stream)) <= 2 * len(notes), (shown + cut - len(stream), notes)


def test_a_follower_of_a_log_cut_before_it_started_shows_only_what_follows(
    tmp_path: Path,
) -> None:
    # A retry's follower starts on the log of the attempts before it, cut already: it must not
    # show that output again, however the log rotates from there.
    path = tmp_path / "log.txt"
    log, fd = capped(path)
    log.write(numbered(0, 5_000))  # the first attempt, past the cap
    follower = _LogFollower(str(path), LIMIT)
    seen = follow(log, fd, follower, [numbered(at, 100) for at in range(5_000, 6_000, 100)])
    assert line_numbers(seen) == list(range(5_000, 6_000))
