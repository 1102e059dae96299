"""The audit log of a team server: one JSON line per request that may change something.

`AuditMiddleware` (outside `security.Identify`, so refusals are recorded too) writes, for every
POST, PUT, PATCH and DELETE, after its answer: the time, the principal (name, kind, role) and
the address it came from, the method and path, the resource id and namespace the route acted
on (routes note them in `request.state.audit`), and the HTTP status with its result (`ok`,
`denied` for 401/403, `failed` otherwise). `headwater server audit` reads the log back.

The file is rotated by size (`logging.handlers.RotatingFileHandler`: `audit.jsonl`, then
`audit.jsonl.1` ... the oldest), so the log stays bounded; reading follows the rotation from the
oldest file. One server process writes one file: servers sharing a machine and a
`HEADWATER_HOME` give each its own `--audit-log`.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from headwater.errors import InvalidArgumentError

__all__ = ["AuditLog", "AuditMiddleware", "audit_time", "read_audit"]

#: Methods that change nothing: not recorded.
_SAFE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: Path parameters that name the resource a route acts on, most specific first.
_ID_PARAMS = (
    "version_id",
    "run_id",
    "recurring_run_id",
    "experiment_id",
    "pipeline_id",
    "artifact_id",
    "name",
)


class AuditLog:
    """Appends audit records to `path`, rotated past `max_bytes` keeping `backups` old files.

    Raises:
        InvalidArgumentError: The limits are out of range, or the file cannot be opened.
    """

    def __init__(self, path: Path, *, max_bytes: int = 10 * 2**20, backups: int = 5) -> None:
        if max_bytes < 1024:
            raise InvalidArgumentError(
                f"the audit log's size limit must be at least 1 KiB, got {max_bytes}"
            )
        if not 1 <= backups <= 1000:
            raise InvalidArgumentError(f"the audit log keeps 1 to 1000 old files, got {backups}")
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(
                self.path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
            )
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot write the audit log {self.path}: {exc.strerror or exc} (choose another "
                "with --audit-log)"
            ) from exc
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._handler = handler
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        """Append one record (a JSON line)."""
        line = json.dumps(record, sort_keys=False, default=str)
        entry = logging.LogRecord("headwater.audit", logging.INFO, "", 0, line, None, None)
        with self._lock:
            self._handler.emit(entry)

    def close(self) -> None:
        self._handler.close()


class AuditMiddleware:
    """ASGI middleware: `log` gets a record of every request that may change something."""

    def __init__(self, app: Any, *, log: AuditLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE:
            await self.app(scope, receive, send)
            return
        noted: dict[str, Any] = {}
        scope.setdefault("state", {})["audit"] = noted
        status = [500]

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.log.write(_record(scope, status[0], noted))


def _record(scope: Any, status: int, noted: dict[str, Any]) -> dict[str, Any]:
    principal = scope.get("state", {}).get("principal")
    params = scope.get("path_params") or {}
    resource = noted.get("resource") or next(
        (str(params[k]) for k in _ID_PARAMS if params.get(k)), ""
    )
    client = scope.get("client") or ("", 0)
    return {
        "time": audit_time(),
        "principal": getattr(principal, "name", "") if principal is not None else "",
        "kind": getattr(principal, "kind", "") if principal is not None else "",
        "role": getattr(principal, "role", "") if principal is not None else "",
        "address": str(client[0]),
        "method": scope["method"],
        "route": scope["path"],
        "resource": resource,
        "namespace": noted.get("namespace", ""),
        "status": status,
        "result": "ok" if status < 400 else "denied" if status in (401, 403) else "failed",
    }


def audit_time(now: float | None = None) -> str:
    """A record's time: ISO 8601 UTC with milliseconds (sorts as text)."""
    now = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


def read_audit(path: Path) -> Iterator[dict[str, Any]]:
    """The records of the log at `path`, oldest first (its rotated files first).

    Raises:
        InvalidArgumentError: There is no log at `path`.
    """
    path = Path(path)
    rotated = sorted(
        (p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )
    files = [*rotated, path] if path.exists() else rotated
    if not files:
        raise InvalidArgumentError(
            f"no audit log at {path}: a server writes it once a change is requested "
            "(see --audit-log)"
        )
    for file in files:
        with file.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                line = line.strip()
                if not line:
                    continue
                try:
                    found = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                if isinstance(found, dict):
                    yield found
