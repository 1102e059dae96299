"""Lineage: the graph of artifacts, executions and runs around one artifact or execution.

A breadth-first walk over the events table, one query per level and direction with ids
batched, then one batch of reads for the nodes' details (see `SqlMetadataStore.lineage`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, RowMapping, Select, select

from headwater.errors import NotFoundError
from headwater.metadata.base import Direction, LineageGraph
from headwater.metadata.encoding import artifact_key
from headwater.metadata.queries import chunks
from headwater.metadata.schema import (
    ARTIFACTS,
    EVENTS,
    EXECUTIONS,
    MODELS,
    PIPELINE_VERSIONS,
    RUNS,
)

# The columns a lineage node shows.
_EXECUTION_NODE = (
    EXECUTIONS.c.id,
    EXECUTIONS.c.task,
    EXECUTIONS.c.run_id,
    EXECUTIONS.c.state,
    EXECUTIONS.c.inputs,
    EXECUTIONS.c.component,
)
_ARTIFACT_NODE = (
    ARTIFACTS.c.id,
    ARTIFACTS.c.uri,
    ARTIFACTS.c.name,
    ARTIFACTS.c.schema_title,
    ARTIFACTS.c.digest,
)


def lineage_graph(
    conn: Connection, ref: int | str, direction: Direction, depth: int, masked: str
) -> LineageGraph:
    """The graph around `ref` (an artifact id or URI, or "e:<execution id>").

    Args:
        conn: The connection of the caller's transaction.
        ref: Where to start.
        direction: upstream, downstream or both.
        depth: Layers of executions to walk in each direction.
        masked: The store's URL (password masked), for the error message.

    Raises:
        NotFoundError: No artifact or execution matches `ref`.
    """
    text = str(ref).strip() if not isinstance(ref, int) else ""
    if text.startswith("e:") and text[2:].isdigit():
        start: tuple[str, int] = ("e", int(text[2:]))
        found = conn.execute(select(EXECUTIONS.c.id).where(EXECUTIONS.c.id == start[1])).first()
    else:
        key = artifact_key(ref)
        column = ARTIFACTS.c.id if isinstance(key, int) else ARTIFACTS.c.uri
        found = conn.execute(select(ARTIFACTS.c.id).where(column == key)).first()
        start = ("a", int(found.id) if found else 0)
    if found is None:
        raise NotFoundError(
            f"no artifact or execution {ref!r} in the metadata store {masked!r}: pass an "
            "artifact id, an artifact URI, or e:<execution id>"
        )
    walk = _Walk(conn)
    walk.seen[start] = None
    if direction in ("upstream", "both"):
        walk.run(start, upstream=True, depth=depth)
    if direction in ("downstream", "both"):
        walk.run(start, upstream=False, depth=depth)
    return walk.graph()


class _Walk:
    """Breadth-first walk over events: one query per level and direction, ids batched."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.seen: dict[tuple[str, int], None] = {}  # ordered set of ("a"|"e", id)
        self.edges: dict[tuple[str, str, str, str], None] = {}

    def run(self, start: tuple[str, int], *, upstream: bool, depth: int) -> None:
        # Upstream: artifact <-OUTPUT- execution <-INPUT- artifact; downstream the reverse.
        to_executions = "OUTPUT" if upstream else "INPUT"
        to_artifacts = "INPUT" if upstream else "OUTPUT"
        seen_a: set[int] = set()
        seen_e: set[int] = set()
        artifacts: set[int] = set()
        executions: set[int] = set()
        layers = 0
        if start[0] == "a":
            seen_a.add(start[1])
            artifacts = set(seen_a)
        elif depth >= 1:
            seen_e.add(start[1])
            executions = set(seen_e)
            layers = 1
        while True:
            if executions:
                rows = self._events("execution_id", executions, to_artifacts)
                artifacts = {r.artifact_id for r in rows} - seen_a
                seen_a |= artifacts
                self._add(rows, "a", artifacts)
            if not artifacts or layers >= depth:
                return
            rows = self._events("artifact_id", artifacts, to_executions)
            executions = {r.execution_id for r in rows} - seen_e
            seen_e |= executions
            self._add(rows, "e", executions)
            layers += 1
            if not executions:
                return

    def _add(self, rows: list[Row[Any]], kind: str, new: set[int]) -> None:
        for r in rows:
            a, e = f"a:{r.artifact_id}", f"e:{r.execution_id}"
            pair = (a, e) if r.kind == "INPUT" else (e, a)
            self.edges[(*pair, r.kind, r.slot)] = None
        self.seen.update(dict.fromkeys((kind, i) for i in sorted(new)))

    def _events(self, column: str, ids: set[int], kind: str) -> list[Row[Any]]:
        rows: list[Row[Any]] = []
        for chunk in chunks(sorted(ids)):
            query = select(
                EVENTS.c.execution_id, EVENTS.c.artifact_id, EVENTS.c.kind, EVENTS.c.slot
            ).where(EVENTS.c[column].in_(chunk), EVENTS.c.kind == kind)
            rows.extend(self.conn.execute(query.order_by(EVENTS.c.id)))
        return rows

    def graph(self) -> LineageGraph:
        """The nodes (in walk order, runs last) and edges, loaded in batches."""
        nodes: dict[str, dict[str, Any]] = {f"{k}:{i}": {} for k, i in self.seen}
        edges = [{"from": f, "to": t, "kind": k, "slot": s} for f, t, k, s in self.edges]
        run_ids: dict[str, None] = {}
        ids = [i for k, i in self.seen if k == "e"]
        for r in self._fetch(select(*_EXECUTION_NODE), EXECUTIONS.c.id, ids):
            node = {**r, "id": f"e:{r['id']}", "inputs": dict(r["inputs"] or {})}
            nodes[node["id"]] = {"id": node["id"], "kind": "execution", **node}
            run_ids[r["run_id"]] = None
            edges.append({"from": f"r:{r['run_id']}", "to": node["id"], "kind": "RUN", "slot": ""})
        ids = [i for k, i in self.seen if k == "a"]
        for r in self._fetch(select(*_ARTIFACT_NODE), ARTIFACTS.c.id, ids):
            node = {**r, "id": f"a:{r['id']}"}
            nodes[node["id"]] = {"id": node["id"], "kind": "artifact", **node}
        self._registered(nodes)
        runs = select(RUNS.c.run_id, PIPELINE_VERSIONS.c.name, RUNS.c.state).join(
            PIPELINE_VERSIONS,
            PIPELINE_VERSIONS.c.pipeline_version_id == RUNS.c.pipeline_version_id,
        )
        for r in self._fetch(runs, RUNS.c.run_id, list(run_ids)):
            nodes[f"r:{r['run_id']}"] = {
                "id": f"r:{r['run_id']}",
                "kind": "run",
                "pipeline": r["name"],
                "state": r["state"],
            }
        return LineageGraph(nodes=[n for n in nodes.values() if n], edges=edges)

    def _registered(self, nodes: dict[str, dict[str, Any]]) -> None:
        """Add `models` (`[{"name", "version", "stage"}]`) to artifacts registered as models."""
        by_uri = {n["uri"]: n for n in nodes.values() if n.get("kind") == "artifact"}
        query = select(MODELS.c.uri, MODELS.c.name, MODELS.c.version, MODELS.c.stage)
        rows = list(self._fetch(query.order_by(MODELS.c.id), MODELS.c.uri, list(by_uri)))
        for r in rows:
            entry = {"name": r["name"], "version": r["version"], "stage": r["stage"]}
            by_uri[r["uri"]].setdefault("models", []).append(entry)

    def _fetch(
        self, query: Select[Any], key: ColumnElement[Any], ids: list[Any]
    ) -> Iterator[RowMapping]:
        for chunk in chunks(ids):
            yield from self.conn.execute(query.where(key.in_(chunk))).mappings()
