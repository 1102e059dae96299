"""Cache keys: pure functions of what determines a task's outputs.

A key covers the executor (image, command, args, env; for a task run in its image, the
image's id), the input parameter values, the input
artifacts' *content* (not their URIs: a changed file is a miss, the same bytes under another
run's URI a hit), the declared outputs, and the user's `cache_key`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from headwater.artifacts.base import content_digest
from headwater.config import TASK_RUN_ENV
from headwater.task import Launch


def local_digest(uri: str) -> str | None:
    """The content digest (hex) of a local artifact; None when nothing with content is there
    (Metrics artifacts are metadata only) or the URI is remote (its store digests it).

    The digest itself is `headwater.artifacts.base.content_digest`, the only one.
    """
    found = content_digest(uri)
    return None if found is None else found.hex


def artifact_fingerprint(artifact: Mapping[str, Any], digest: Callable[[str], str | None]) -> Any:
    """What identifies an input artifact for caching: its type, content and metadata."""
    uri = str(artifact.get("uri", ""))
    content = digest(uri)
    return {
        "type": (artifact.get("type") or {}).get("schemaTitle", ""),
        "content": content if content is not None else (uri if "://" in uri else None),
        "metadata": artifact.get("metadata") or {},
    }


def cache_key(launch: Launch, digest: Callable[[str], str | None] = local_digest) -> str:
    """The cache key of one task launch (hex SHA-256)."""
    container = launch.container
    inputs = launch.executor_input["inputs"]
    outputs = launch.executor_input["outputs"]
    material = {
        "image": container.get("image", ""),
        "command": container.get("command") or [],
        "args": container.get("args") or [],
        # Env is part of the key: KFP's own key leaves it out and serves stale results (#14339).
        "env": sorted((k, v) for k, v in launch.env.items() if k not in TASK_RUN_ENV),
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
    if launch.in_image is not None:
        # Run in its image: which image exactly (its id, when resolved), unlike a host task.
        image = launch.in_image
        material["in_image"] = image.digest or f"unresolved:{image.image}"
    if launch.platform is not None:  # its settings, and a keyed digest of secret values
        material["platform"] = launch.platform.cache_material()
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
