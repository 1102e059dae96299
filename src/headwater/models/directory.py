"""What every framework's Model artifact shares: `metadata.json` beside the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METADATA_FILE = "metadata.json"


def read_metadata(path: str) -> dict[str, Any]:
    """The `metadata.json` in the Model directory at `path`, or beside the model file at
    `path` ({} when there is none or it is not a JSON object)."""
    where = Path(path)
    file = where / METADATA_FILE if where.is_dir() else where.with_name(METADATA_FILE)
    try:
        found = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
