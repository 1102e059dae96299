"""Lineage: what made an artifact (upstream) and what it made (downstream), as a graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from headwater.api._args import INT64_MAX, choice, count
from headwater.api._store import MetadataArg, reading
from headwater.api.artifacts import artifact_ref
from headwater.api.models import find_model, is_model_spec
from headwater.errors import NotFoundError
from headwater.metadata.base import Direction, MetadataStore
from headwater.metadata.reconcile import presented_run

__all__ = ["Lineage", "lineage"]

_DIRECTIONS = ("UPSTREAM", "DOWNSTREAM", "BOTH")


@dataclass(frozen=True)
class Lineage:
    """A lineage graph.

    Nodes are dicts with `id` ("a:<n>" an artifact, "e:<n>" a task execution, "r:<run id>"
    a run) and `kind` ("artifact", "execution", "run") plus that kind's fields; edges are
    `{"from": id, "to": id, "kind": "INPUT"|"OUTPUT"|"RUN", "slot": str}`.
    """

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """`{"nodes": [...], "edges": [...]}` (`lineage --json`)."""
        return {"nodes": self.nodes, "edges": self.edges}


def lineage(
    ref: int | str,
    *,
    direction: str = "both",
    depth: int = 10,
    metadata: MetadataArg = None,
) -> Lineage:
    """The graph around an artifact or a task execution. Reads only.

    Args:
        ref: An artifact id (`12`, `"a:12"`) or URI, `"e:<execution id>"`, or a registered
            model as `headwater serve` takes it (`NAME:VERSION`, `NAME@STAGE`, `NAME`: its
            production version, else its newest), meaning the model's artifact.
        direction: "upstream" (what led to it), "downstream" (what came from it) or "both".
        depth: How many layers of task executions to walk each way (0: the node alone).
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        NotFoundError: No artifact, execution or registered model matches `ref`.
        InvalidArgumentError: `direction` is not one of the three, or `depth` is negative.
        StorageError: The store cannot be opened for reading.
    """
    way = cast(Direction, choice("lineage direction", direction, _DIRECTIONS).lower())
    count("depth", depth, minimum=0)
    key = _start(ref)
    with reading(metadata) as store:
        if store is None or key is None:
            raise NotFoundError(
                f"no artifact or execution {str(ref)!r}: pass an artifact id, an artifact "
                "URI, e:<execution id> or a registered model (NAME:VERSION)"
            )
        if isinstance(key, str) and not key.startswith("e:") and is_model_spec(key):
            key = find_model(key, metadata=store).uri
        graph = store.lineage(key, direction=way, depth=depth)
        nodes = _presented(store, graph.nodes)
    return Lineage(nodes=nodes, edges=graph.edges)


def _start(ref: int | str) -> int | str | None:
    """`ref` as the store takes it; None for an id beyond 64 bits (it names nothing)."""
    text = ref.strip() if isinstance(ref, str) else ""
    if text.startswith("e:") and text[2:].isdigit():
        return text if int(text[2:]) <= INT64_MAX else None
    return artifact_ref(ref)


def _presented(store: MetadataStore, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes as readers show them: a RUNNING run whose engine died is INTERRUPTED, and its
    RUNNING executions FAILED (see `headwater.metadata.reconcile`)."""
    dead = set()
    for node in nodes:
        if node["kind"] == "run" and node.get("state") == "RUNNING":
            run = store.get_run(node["id"][2:])
            if run is not None and presented_run(run).state == "INTERRUPTED":
                dead.add(run.run_id)
    if not dead:
        return nodes
    shown = []
    for node in nodes:
        run_id = node["id"][2:] if node["kind"] == "run" else node.get("run_id")
        if run_id in dead and node.get("state") == "RUNNING":
            node = {**node, "state": "INTERRUPTED" if node["kind"] == "run" else "FAILED"}
        shown.append(node)
    return shown
