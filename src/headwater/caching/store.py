"""`FileTaskCache`: task outputs remembered as small JSON files under `$HEADWATER_HOME/cache`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from headwater.caching.base import TaskCache
from headwater.caching.keys import cache_key, content_digest
from headwater.engine.model import Launch, Outputs


class FileTaskCache(TaskCache):
    """One JSON entry per cache key, pointing at the original run's artifacts.

    A hit reuses the artifacts where they are (nothing is copied); if one of them has since
    been deleted or changed, the entry is a miss. Writes are atomic (rename), so concurrent
    runs can share a cache directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._digests: dict[tuple[str, float, int], str | None] = {}

    def _digest(self, uri: str) -> str | None:
        path = uri[len("file://") :] if uri.startswith("file://") else uri
        try:
            st = os.stat(path)
        except OSError:
            return content_digest(uri)
        memo = (path, st.st_mtime, st.st_size)
        if memo not in self._digests:
            self._digests[memo] = content_digest(uri)
        return self._digests[memo]

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def lookup(self, *, launch: Launch) -> Outputs | None:
        """The outputs recorded under this launch's key, if all their artifacts still hold."""
        path = self._path(cache_key(launch, self._digest))
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        for arts in entry["artifacts"].values():
            for art in arts:
                expected = art.get("_digest")
                if expected is not None and self._digest(art["uri"]) != expected:
                    return None
        artifacts = {
            name: [{k: v for k, v in a.items() if k != "_digest"} for a in arts]
            for name, arts in entry["artifacts"].items()
        }
        return Outputs(dict(entry["parameters"]), artifacts)

    def record(self, *, launch: Launch, outputs: Outputs) -> None:
        """Remember `outputs` under this launch's key."""
        artifacts: dict[str, list[dict[str, Any]]] = {
            name: [{**a, "_digest": self._digest(str(a.get("uri", "")))} for a in arts]
            for name, arts in outputs.artifacts.items()
        }
        entry = {"parameters": outputs.parameters, "artifacts": artifacts, "task": launch.name}
        path = self._path(cache_key(launch, self._digest))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, default=str)
        os.replace(tmp, path)

    def clear(self) -> int:
        """Delete every entry; return how many there were."""
        if not self.root.exists():
            return 0
        count = sum(1 for _ in self.root.rglob("*.json"))
        shutil.rmtree(self.root)
        return count
