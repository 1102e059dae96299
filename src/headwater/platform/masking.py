"""Masking secret values out of text a task writes: `***` wherever a value appears.

`Masker` knows the values of the secrets a task was given and replaces each occurrence, as
CI systems do, in text (an error message) or bytes (a log). `StreamMasker` does the same for
output that arrives in chunks: a value split across two writes is still masked, because the
end of a chunk that could be the start of a value is held back until the next one shows
whether it is. Only what could still become a value is held back, so ordinary output is
passed on at once.

Every place a value occurs is masked, overlapping ones included: where two occurrences (of
one value or of two) overlap or one holds another, their union becomes one `***`, so no
part of a value is ever left showing. Besides each value as given, its forms that commonly
reach output are masked too: each of its lines, and its escaped forms in JSON and in a
Python `repr`. Values shorter than `MIN_LENGTH` characters are not masked (see there).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import AnyStr, Generic

#: What replaces a value.
REPLACEMENT = "***"
#: Values (and lines of values) shorter than this are not masked. Masking "on" or "123" would
#: replace every such string in every line of output, leaving logs unreadable while hiding
#: nothing: a value that short is guessed in a few thousand tries, and the pattern of what
#: was replaced would show it anyway. The task is warned about them instead.
MIN_LENGTH = 4


def _forms(value: str) -> set[str]:
    """`value` and the forms of it that commonly reach output (none if it is only blanks)."""
    if not value.strip():
        return set()
    forms = {value, value.strip()}
    forms.update(line.strip() for line in value.splitlines())  # one masked line at a time
    forms.add(json.dumps(value)[1:-1])  # "\n" as \n, non-ASCII as \uXXXX
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    forms.add(repr(value)[1:-1])  # as a traceback shows a str argument
    return {form for form in forms if len(form) >= MIN_LENGTH and not form.isspace()}


def _text(value: str | bytes) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")  # as apply_platform puts it in $ENV
    return value


def maskable(value: str | bytes) -> bool:
    """True if `value` (or a line of it) is long enough to be masked."""
    return bool(_forms(_text(value)))


class _Values(Generic[AnyStr]):
    """The values as one type (str or bytes), longest first, and how to find them."""

    def __init__(self, values: Iterable[AnyStr], replacement: AnyStr) -> None:
        self.values: tuple[AnyStr, ...] = tuple(sorted(set(values), key=len, reverse=True))
        self.replacement: AnyStr = replacement

    def spans(self, text: AnyStr, masked: int = 0) -> list[tuple[int, int]]:
        """Where values occur in `text`, overlaps merged, in order: [(start, end), ...].

        The first `masked` characters count as one occurrence (the end of a mask already
        passed on), so a value that overlaps them continues that mask.
        """
        found = [(0, masked)] if masked else []
        for value in self.values:
            start = text.find(value)
            while start >= 0:
                found.append((start, start + len(value)))
                start = text.find(value, start + 1)
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def unfinished(self, text: AnyStr) -> int:
        """Where the longest end of `text` that is the start of a value (not all of it) begins;
        `len(text)` if there is none."""
        best = len(text)
        for value in self.values:
            first = value[:1]
            start = text.find(first, max(0, len(text) - len(value) + 1))
            while 0 <= start < best:
                if value.startswith(text[start:]):
                    best = start
                    break
                start = text.find(first, start + 1)
        return best

    def emit(
        self, text: AnyStr, spans: Sequence[tuple[int, int]], upto: int, done: int
    ) -> tuple[AnyStr, int]:
        """`text[:upto]` masked, leaving out the first `done` characters, which were masked
        (and emitted) before; and where the last mask passed on (now or before) ends."""
        out = []
        position = masked_end = done
        for start, end in spans:
            if start >= upto:
                break
            if end <= done:
                continue
            if start > position:
                out.append(text[position:start])
            if start >= done:  # a mask that starts in `done` was emitted with it
                out.append(self.replacement)
            position = end
            masked_end = end
        if position < upto:
            out.append(text[position:upto])
        return text[:0].join(out), masked_end


class Masker:
    """Replaces the values of secrets with `***` in text and bytes.

    Args:
        values: The secrets' values, as bytes (as read from the store) or text. Values shorter
            than `MIN_LENGTH` characters are left out (see `maskable`).

    Example:
        >>> Masker([b"hunter2-pw"]).mask("login with hunter2-pw failed")
        'login with *** failed'
    """

    def __init__(self, values: Iterable[str | bytes]) -> None:
        texts: set[str] = set()
        for value in values:
            texts |= _forms(_text(value))
        # Bytes decoded with surrogateescape encode back to themselves, so this holds every
        # value byte for byte, UTF-8 or not.
        data = {t.encode("utf-8", "surrogateescape") for t in texts}
        self._text = _Values(texts, REPLACEMENT)
        self._bytes = _Values(data, REPLACEMENT.encode())

    def __bool__(self) -> bool:
        return bool(self._text.values)

    def mask(self, text: str) -> str:
        """`text` with every value replaced by `***`."""
        return self._text.emit(text, self._text.spans(text), len(text), 0)[0]

    def mask_bytes(self, data: bytes) -> bytes:
        """`data` with every value (as UTF-8 bytes) replaced by `***`."""
        return self._bytes.emit(data, self._bytes.spans(data), len(data), 0)[0]

    def stream(self) -> StreamMasker:
        """A masker for output that arrives in chunks (see `StreamMasker`)."""
        return StreamMasker(self._bytes)


class StreamMasker:
    """Masks a stream of bytes chunk by chunk, as if it were masked whole.

    `feed` returns what can be passed on now; `close` returns the rest. Their concatenation
    is `Masker.mask_bytes` of the whole stream, however it was split.
    """

    def __init__(self, values: _Values[bytes]) -> None:
        self._values = values
        self._pending = b""  # not passed on yet: it may be the start of a value
        self._done = 0  # the start of `_pending` that is the end of a mask already passed on

    def feed(self, chunk: bytes) -> bytes:
        """Take the next chunk; return the masked output that is now certain."""
        text = self._pending + chunk
        spans = self._values.spans(text, self._done)
        keep = self._values.unfinished(text)
        out, masked_end = self._values.emit(text, spans, keep, self._done)
        self._pending = text[keep:]
        self._done = max(0, masked_end - keep)
        return out

    def close(self) -> bytes:
        """The rest of the stream, masked; the masker is then empty."""
        text, self._pending = self._pending, b""
        spans = self._values.spans(text, self._done)
        out, _ = self._values.emit(text, spans, len(text), self._done)
        self._done = 0
        return out
