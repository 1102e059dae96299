"""How values are stored, shared by every writer of the SQL schema (standard library only).

`SqlMetadataStore` (SQLAlchemy) and `SqliteWriter` (the standard library's `sqlite3`) write
the same rows; these functions make sure they write the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any


def json_column(value: Any) -> str | None:
    """The text of a JSON column: SQL NULL (None) for None, non-finite floats as strings
    (PostgreSQL's json rejects NaN), and anything else json cannot encode as its str()."""
    if value is None:
        return None
    try:
        return json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def ir_digest(ir: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of an IR document (the pipeline version)."""
    text = json.dumps(ir, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def artifact_key(ref: int | str) -> int | str:
    """An artifact reference as an id (int) or a URI (str)."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    text = str(ref).strip()
    if text.isdigit():
        return int(text)
    if text.startswith("a:") and text[2:].isdigit():
        return int(text[2:])
    return text


def step_points(name: str, points: Any) -> list[list[int | float | None]]:
    """The `points` column of a step series: `[[step, value], ...]` in step order, a value
    that is not a finite number as null.

    Raises:
        ValueError: A step is not a whole number or a value not a number (naming `name`).
    """
    out: list[list[int | float | None]] = []
    for point in points:
        step, value = point
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"step metric {name!r}: step {step!r} is not a whole number")
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"step metric {name!r}: value {value!r} is not a number")
            value = float(value) if math.isfinite(value) else None
        out.append([step, value])
    out.sort(key=lambda p: p[0])  # type: ignore[arg-type,return-value]
    return out
