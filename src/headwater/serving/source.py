"""`ModelSource`: where one served model comes from, once its MODEL spec is resolved."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The frameworks the server has a runtime for (`headwater.serving.runtimes`).
FRAMEWORKS = ("xgboost", "sklearn", "pytorch", "custom")


@dataclass(frozen=True)
class ModelSource:
    """A model to load: its endpoint name and version, framework and local files.

    Made by `headwater.serving.resolve.resolve` from a MODEL spec; plain data (JSON-able via
    `to_json`), so the CLI resolves once and hands the same sources to every worker process.

    Attributes:
        name: The endpoint's name (`alias=` in the spec, else the registry name or file stem).
        version: The version label the server reports ("3" for a registry version, else "1").
        framework: One of `FRAMEWORKS`.
        path: The model's local file or directory (downloaded first if it was remote); None
            for a custom handler that loads nothing.
        handler: For "custom": the handler class, `"package.module:Class"` or
            `"path/to/file.py:Class"`.
        spec: The MODEL spec as the user wrote it, for messages.
        uri: The artifact URI it came from, when there was one.
        registered: `"NAME:VERSION"` when it came from the model registry.
        details: Anything else worth showing (the registry stage, the metrics).
    """

    name: str
    version: str
    framework: str
    path: str | None
    handler: str | None = None
    spec: str = ""
    uri: str | None = None
    registered: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: `'churn' version 3 (xgboost, registry churn:3, /path)`."""
        where = ", ".join(
            w for w in (self.framework, self.registered and f"registry {self.registered}",
                        self.handler, self.uri or self.path) if w
        )  # fmt: skip
        return f"{self.name!r} version {self.version} ({where})"

    def to_json(self) -> dict[str, Any]:
        """The source as JSON (for the worker processes' configuration)."""
        return {
            "name": self.name,
            "version": self.version,
            "framework": self.framework,
            "path": self.path,
            "handler": self.handler,
            "spec": self.spec,
            "uri": self.uri,
            "registered": self.registered,
            "details": self.details,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelSource:
        """The source `to_json` wrote."""
        return cls(**data)
