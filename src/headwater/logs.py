"""Task logs of any size: written under a size cap, read from the end in bounded bytes.

A task's log is `log.txt` in its directory. The task's output reaches it through a pipe that
the local executor's fork server reads (`headwater.executors.task_logs`; on Dask, the worker
that ran it), written with a `CappedLog` under the cap (`HEADWATER_TASK_LOG_LIMIT`, 64 MiB by
default, 0 for none): once the file passes the cap,
its first half is kept, a marked cut follows, then the latest quarter of the cap, and the file
goes on growing from there until it passes the cap again (a rotation). So a task that prints
1 GB leaves a log of at most the cap, holding how it started and how it ended.

Readers never read a whole log to show its end: `tail_lines` reads back from the end of the
file, at most a bounded number of bytes, however long its lines.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO

#: The most bytes a tail reads (the UI's log panel): a log of one 48 MB line shows its end.
TAIL_BYTES = 1 << 20
_BLOCK = 64 * 1024
_COPY = 1 << 20


def tail_lines(
    path: str | os.PathLike[str], lines: int, *, limit: int = TAIL_BYTES
) -> tuple[list[str], bool]:
    """The last `lines` lines of the file at `path`, and whether the `limit` bytes read from
    its end stopped short of them (then the first line returned is the end of a longer one).

    Raises:
        OSError: The file cannot be read.
    """
    blocks: list[bytes] = []
    newlines = read = 0
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        while end > 0 and newlines <= lines and read < limit:
            start = max(0, end - _BLOCK, end - (limit - read))
            f.seek(start)
            block = f.read(end - start)
            blocks.append(block)
            newlines += block.count(b"\n")
            read += len(block)
            end = start
    text = b"".join(reversed(blocks)).decode("utf-8", errors="replace")
    kept = text.splitlines()[-lines:] if lines else []
    return kept, end > 0 and newlines <= lines


def attempt_marker(attempt: int) -> bytes:
    """The line that starts a new attempt's output in a log that already holds earlier output
    (a retry, or the same task in a run that was resumed)."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"\n===== headwater: attempt {attempt} starts at {when}; "
        "the output above is from an earlier attempt =====\n"
    ).encode()


@contextlib.contextmanager
def appending(path: str, attempt: int, limit: int | None) -> Iterator[Callable[[bytes], None]]:
    """A writer that appends an attempt's output to the log at `path` (see `open_attempt`).
    Errors writing are swallowed, as `CappedLog.write` does.

    Raises:
        OSError: The log cannot be opened.
    """
    log = open_attempt(path, attempt, limit)
    try:
        yield log.write
    finally:
        os.close(log.fd)


def open_attempt(path: str, attempt: int, limit: int | None, *, inherit: bool = True) -> CappedLog:
    """The log at `path` (made, and its folder), opened to append an attempt's output: below a
    line marking the attempt's start when the log already holds output, under `limit` bytes
    (None or 0: no cap). The caller closes its `fd`; not `inherit`, it closes on exec.

    Raises:
        OSError: The log cannot be opened.
        ValueError: `limit` is below `MIN_LIMIT`.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if os.path.islink(path):  # ours is a file: a link there is a (sandboxed) task's doing
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
    fd = os.open(path, flags | (0 if inherit else os.O_CLOEXEC), 0o644)
    try:
        log = CappedLog(path, fd, limit or 0)
        if log.size:
            log.write(attempt_marker(attempt))
    except BaseException:
        os.close(fd)
        raise
    return log


#: At most this much of a task's output is passed on after the task ended: what it wrote before
#: it ended is in its pipe (64 KiB by default); more can only come from a process it left.
AFTER_END_BYTES = 1 << 20


#: A cut's marker is always this long (padded), so what follows it never moves as more is cut.
MARKER_LEN = 160
_MARKER = re.compile(rb"\n===== headwater: ([0-9,]+) bytes of output cut here")


def _cut_marker(cut: int) -> bytes:
    text = f"\n===== headwater: {cut:,} bytes of output cut here (HEADWATER_TASK_LOG_LIMIT) "
    return text.ljust(MARKER_LEN - 1, "=").encode() + b"\n"


def cut_so_far(f: IO[bytes], limit: int) -> int:
    """How many bytes of output the log open as `f`, capped at `limit`, has cut so far (0
    before its first rotation). Its reader's position past the marker moves back by as much
    more at each rotation: what a follower of a growing log needs to keep its place."""
    f.seek(limit // 2)
    found = _MARKER.match(f.read(MARKER_LEN))
    return int(found[1].replace(b",", b"")) if found else 0


#: The smallest cap that leaves room for a head, a marker and a tail.
MIN_LIMIT = 4096


class CappedLog:
    """Appends to the log open as file descriptor `fd` (opened to append), keeping the file
    at most `limit` bytes (0: no cap): past it, the file becomes its first `limit // 2`
    bytes, a marker naming how much was cut, and its last `limit // 4` bytes; then it grows
    again.

    Only this object may write to the file while it is in use; a reader tailing it meanwhile
    sees the file shrink at each rotation, never lose its start or its latest output.
    """

    def __init__(self, path: str, fd: int, limit: int) -> None:
        """`limit` 0 is no cap."""
        if 0 < limit < MIN_LIMIT:
            raise ValueError(f"a log limit must be at least {MIN_LIMIT} bytes, got {limit}")
        self._path = path
        self._fd = fd
        self._limit = limit
        self._size = os.fstat(fd).st_size
        #: The bytes cut so far (an earlier attempt's cuts count: they share the marker).
        self._cut = 0
        if limit and self._size > limit // 2 + MARKER_LEN:
            with contextlib.suppress(OSError), open(path, "rb") as f:
                self._cut = cut_so_far(f, limit)

    def write(self, data: bytes) -> None:
        """Append `data`, then rotate if the file is past the limit. Errors writing are
        swallowed: a task whose log is gone runs on."""
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError:
                return
            self._size += written
            view = view[written:]
        if self._limit and self._size > self._limit:
            with contextlib.suppress(OSError):
                self._rotate()

    @property
    def size(self) -> int:
        """The log's size in bytes, as far as this writer knows."""
        return self._size

    @property
    def fd(self) -> int:
        """The file descriptor it appends to (its opener closes it)."""
        return self._fd

    def _rotate(self) -> None:
        at, keep = self._limit // 2, self._limit // 4
        body = at + MARKER_LEN  # where the kept tail goes, after the marker
        start = self._size - keep
        cut = self._cut + start - (body if self._cut else at)
        # Another descriptor, not opened to append: on Linux a write through an appending one
        # goes to the end whatever its offset.
        fd = os.open(self._path, os.O_RDWR | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_ino != os.fstat(self._fd).st_ino:
                return  # the file was replaced: leave the new one alone
            os.pwrite(fd, _cut_marker(cut), at)
            done = 0
            while done < keep:  # front to back: a write never reaches bytes not yet read
                chunk = os.pread(fd, min(_COPY, keep - done), start + done)
                if not chunk:
                    break
                os.pwrite(fd, chunk, body + done)
                done += len(chunk)
            os.ftruncate(fd, body + done)
        finally:
            os.close(fd)
        self._cut = cut
        self._size = body + done
