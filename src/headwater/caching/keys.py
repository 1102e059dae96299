"""Cache keys: pure functions of what determines a task's outputs.

A key covers the executor (image, command, args, env), the input parameter values, the input
artifacts' *content* (not their URIs: a changed file is a miss, the same bytes under another
run's URI a hit), the declared outputs, and the user's `cache_key`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from headwater.task import Launch

_CHUNK = 1 << 20


def content_digest(uri: str) -> str | None:
    """BLAKE2b of a local file's bytes, or of a directory's relative paths and bytes.

    Returns None when nothing exists at `uri` (Metrics artifacts are metadata only) or when
    the URI is remote (its digest belongs to the artifact store).
    """
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    if "://" in path:
        return None
    h = hashlib.blake2b(digest_size=20)
    try:
        if os.path.isfile(path):
            _hash_file(h, path)
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    h.update(os.path.relpath(full, path).encode() + b"\0")
                    if os.path.islink(full) or not os.path.isfile(full):
                        # A symlink (maybe dangling) or a FIFO: its name and target, never
                        # its content (a FIFO would block forever).
                        target = os.readlink(full) if os.path.islink(full) else "special"
                        h.update(b"->" + target.encode() + b"\0")
                        continue
                    _hash_file(h, full)
        else:
            return None
    except OSError:
        return None
    return h.hexdigest()


def _hash_file(h: Any, path: str) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)


def artifact_fingerprint(artifact: Mapping[str, Any], digest: Callable[[str], str | None]) -> Any:
    """What identifies an input artifact for caching: its type, content and metadata."""
    uri = str(artifact.get("uri", ""))
    content = digest(uri)
    return {
        "type": (artifact.get("type") or {}).get("schemaTitle", ""),
        "content": content if content is not None else (uri if "://" in uri else None),
        "metadata": artifact.get("metadata") or {},
    }


def cache_key(launch: Launch, digest: Callable[[str], str | None] = content_digest) -> str:
    """The cache key of one task launch (hex SHA-256)."""
    container = launch.container
    inputs = launch.executor_input["inputs"]
    outputs = launch.executor_input["outputs"]
    material = {
        "image": container.get("image", ""),
        "command": container.get("command") or [],
        "args": container.get("args") or [],
        # Env is part of the key: KFP's own key leaves it out and serves stale results (#14339).
        "env": sorted(launch.env.items()),
        "parameters": inputs.get("parameterValues") or {},
        "artifacts": {
            name: [artifact_fingerprint(a, digest) for a in spec.get("artifacts", [])]
            for name, spec in sorted((inputs.get("artifacts") or {}).items())
        },
        "outputs": {
            "parameters": sorted(launch.output_types.items()),
            "artifacts": sorted(
                (name, spec["artifacts"][0]["type"]["schemaTitle"])
                for name, spec in (outputs.get("artifacts") or {}).items()
            ),
        },
        "cache_key": launch.cache_key,
    }
    if launch.platform is not None:  # its settings, and a keyed digest of secret values
        material["platform"] = launch.platform.cache_material()
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
