#!/usr/bin/env python
"""Metadata-store scale benchmark: queries on a store holding 10k realistic runs.

Target from the issue: *a lineage query on a store holding 10k runs returns in under 50 ms*.

The store is filled with ``--runs`` (default 10,000) runs shaped like a training pipeline's,
written with bulk Core inserts into the tables the store itself created (so the schema,
indexes and migrations are the real ones; filling takes seconds instead of the minutes that
10k runs through the engine would). Each run has five executions and five output artifacts::

    raw dataset (shared) -> ingest -> dataset -> featurize -> features -> train -> model
    model + features -> evaluate -> metrics (3 scalar metrics)
    model + metrics  -> report   -> report

and 12 events. Runs come in sweeps of ``--sweep`` (default 3) runs of one pipeline version that
differ in their training parameters: the first run of a sweep computes ``ingest`` and
``featurize``; the others record them CACHED (``cached_from`` the first, the same cache key, an
OUTPUT event re-publishing the first run's artifact), as the engine's recorder does. Sweeps read
their raw dataset from a pool of ``--shared-inputs`` (default 100) datasets, so each raw dataset
feeds ~``runs / 100`` runs. About 3% of runs fail in ``train`` (``evaluate`` and ``report`` are
then CANCELED, with no artifacts). Three pipelines, four versions each, are spread over the runs.

Then the store is reopened (``headwater.metadata.open_store``) and each query is timed
``--queries`` times (default 50) on random targets, after one first call reported on its own:

* ``lineage(model, upstream, depth=5)`` of a random run's model -- the target, p95 < 50 ms;
* ``lineage(features, downstream, depth=5)`` of a random run's features (a mid artifact) --
  held to the same 50 ms;
* ``lineage(model)`` with the CLI's defaults (both directions, depth 10), and
  ``lineage(raw dataset, downstream, depth=5)`` (a shared input: ~1,000 nodes), reported only;
* ``list_runs(limit=50)``, ``list_runs(pipeline=..., state="SUCCEEDED", limit=50)``,
  ``get_run(full id)``, ``get_run(8-character prefix)`` (as the CLI accepts), ``find_cached`` of a
  recorded key (hit) and of an unknown one (miss), reported only.

``--url`` takes any SQLAlchemy URL the store accepts (default: a SQLite file in a temporary
directory, deleted afterwards unless ``--keep``); the database must hold no runs yet. A
PostgreSQL database is left filled (ids and their sequences are consistent, so the store stays
usable).

Usage::

    python benchmarks/metadata_scale.py [--runs 10000] [--url URL] [--queries 50] [--sweep 3]
        [--shared-inputs 100] [--seed 0] [--keep] [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    add_report_options,
    base_machine_info,
    finish,
    heading,
    info_section,
    load_average,
    progress,
    table,
)

TARGET_LINEAGE_S = 0.050

PIPELINE_NAMES = ("train-classifier", "train-regressor", "train-ranker")
PIPELINE_WEIGHTS = (6, 3, 1)
VERSIONS_PER_PIPELINE = 4
METRIC_NAMES = ("accuracy", "loss", "auc")
ROOT = "/home/user/.headwater/artifacts"
_CHUNK_RUNS = 3000  # runs generated and inserted per transaction (bounds memory)


class BenchmarkError(RuntimeError):
    """The store could not be filled, or a query returned something unexpected."""


# --------------------------------------------------------------------------------------------------
# Filling the store.
# --------------------------------------------------------------------------------------------------


@dataclass
class Targets:
    """What the queries pick from (ids of generated records)."""

    run_ids: list[str] = field(default_factory=list)
    models: list[int] = field(default_factory=list)  # artifact ids, succeeded runs only
    features: list[int] = field(default_factory=list)
    raws: list[int] = field(default_factory=list)
    hit_keys: list[str] = field(default_factory=list)
    # A sweep member's model, its train execution and its raw dataset's URI (checked once).
    probe: tuple[int, int, str] | None = None


@dataclass
class Rows:
    """Rows of one chunk, per table, in insertion order."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)


def _key(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def _digest(*parts: object) -> str:
    return hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=20).hexdigest()


class Generator:
    """Makes the rows of runs 0..n-1, chunk by chunk, with explicit ids."""

    def __init__(self, args: argparse.Namespace, rng: random.Random, t0: float) -> None:
        self.args = args
        self.rng = rng
        self.t0 = t0
        self.next_execution = 1
        self.next_artifact = 1
        self.targets = Targets()
        self.sweep: dict[str, Any] = {}
        self.raws: list[dict[str, Any]] = []
        for k in range(args.shared_inputs):
            self.raws.append(
                {
                    "id": self._artifact_id(),
                    "uri": f"s3://lake/raw/part-{k:04d}.parquet",
                    "schema_title": "system.Dataset",
                    "name": "source",
                    "digest": _digest("raw", k),
                    "size": 50_000_000 + k,
                    "metadata": {"rows": 1_000_000},
                    "producer": None,  # imported (dsl.importer), not produced by a run
                    "created_at": t0 - 86400,
                }
            )
        self.targets.raws = [r["id"] for r in self.raws]

    def pipelines(self) -> list[dict[str, Any]]:
        rows = []
        for p, name in enumerate(PIPELINE_NAMES):
            for v in range(VERSIONS_PER_PIPELINE):
                ir = {
                    "pipelineInfo": {"name": name},
                    "schemaVersion": "2.1.0",
                    "sdkVersion": "kfp-2.17.3",
                    "root": {"dag": {"tasks": {t: {} for t in _TASKS}}},
                    "components": {f"comp-{t}": {"executorLabel": f"exec-{t}"} for t in _TASKS},
                    "deploymentSpec": {"executors": {f"exec-{t}": {} for t in _TASKS}},
                    "version": v,
                }
                rows.append(
                    {
                        "id": p * VERSIONS_PER_PIPELINE + v + 1,
                        "name": name,
                        "version": _key("ir", name, v),
                        "ir": ir,
                        "created_at": self.t0 - 86400 + v,
                    }
                )
        return rows

    def _execution_id(self) -> int:
        self.next_execution += 1
        return self.next_execution - 1

    def _artifact_id(self) -> int:
        self.next_artifact += 1
        return self.next_artifact - 1

    def chunk(self, start: int, stop: int) -> Rows:
        rows = Rows()
        if start == 0:
            rows.artifacts.extend(self.raws)
        for r in range(start, stop):
            self._run(r, rows)
        return rows

    def _run(self, r: int, rows: Rows) -> None:
        args, rng = self.args, self.rng
        first = r % args.sweep == 0
        if first:  # a new sweep: its pipeline version and raw dataset
            name = rng.choices(PIPELINE_NAMES, PIPELINE_WEIGHTS)[0]
            version = min(VERSIONS_PER_PIPELINE - 1, r * VERSIONS_PER_PIPELINE // args.runs)
            self.sweep = {
                "pipeline_id": PIPELINE_NAMES.index(name) * VERSIONS_PER_PIPELINE + version + 1,
                "raw": self.raws[(r // args.sweep) % len(self.raws)],
                "group": r // args.sweep,
            }
        sweep = self.sweep
        run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        created = self.t0 + r * 60.0
        failed = rng.random() < 0.03
        lr = round(10 ** rng.uniform(-4, -1), 6)
        params = {"learning_rate": lr, "epochs": rng.choice((5, 10, 20)), "seed": r}
        clock = [created]

        def execution(task: str, state: str, **kw: Any) -> int:
            eid = self._execution_id()
            started = clock[0] + 0.5
            seconds = 0.05 if state == "CACHED" else rng.uniform(5, 60)
            clock[0] = started + seconds
            ran = state in ("SUCCEEDED", "FAILED", "CACHED")
            rows.executions.append(
                {
                    "id": eid,
                    "run_id": run_id,
                    "task": task,
                    "component": f"comp-{task}",
                    "parent_dag": "",
                    "iteration": "",
                    "state": state,
                    "inputs": kw.get("inputs", {}),
                    "outputs": {},
                    "cache_key": kw.get("cache_key", ""),
                    "cached_from": kw.get("cached_from"),
                    "started_at": started if ran else None,
                    "finished_at": clock[0] if ran else None,
                    "log_path": f"/home/user/.headwater/runs/{run_id}/{task}/log.txt",
                    "error": kw.get("error"),
                    "attempts": 1 if ran and state != "CACHED" else 0,
                }
            )
            return eid

        def artifact(task: str, slot: str, title: str, producer: int, **meta: Any) -> int:
            aid = self._artifact_id()
            rows.artifacts.append(
                {
                    "id": aid,
                    "uri": f"{ROOT}/{run_id}/{task}/{slot}",
                    "schema_title": title,
                    "name": slot,
                    "digest": None if title == "system.Metrics" else _digest(run_id, task),
                    "size": None if title == "system.Metrics" else rng.randrange(10**3, 10**8),
                    "metadata": meta,
                    "producer": producer,
                    "created_at": clock[0],
                }
            )
            return aid

        def event(eid: int, aid: int, kind: str, slot: str) -> None:
            rows.events.append(
                {"execution_id": eid, "artifact_id": aid, "kind": kind, "slot": slot, "index": 0}
            )

        # ingest and featurize: computed by a sweep's first run, CACHED in the others.
        raw = sweep["raw"]
        keys = {"ingest": _key("ingest", raw["id"]), "featurize": _key("featurize", sweep["group"])}
        if first:
            e = execution("ingest", "SUCCEEDED", cache_key=keys["ingest"])
            dataset = artifact("ingest", "dataset", "system.Dataset", e, rows=1_000_000)
            sweep.update(ingest=e, dataset=dataset)
            self.targets.hit_keys.append(keys["ingest"])
        else:
            e = execution("ingest", "CACHED", cache_key=keys["ingest"], cached_from=sweep["ingest"])
        event(e, raw["id"], "INPUT", "source")
        event(e, sweep["dataset"], "OUTPUT", "dataset")
        if first:
            e = execution("featurize", "SUCCEEDED", cache_key=keys["featurize"])
            features = artifact("featurize", "features", "system.Dataset", e, columns=128)
            sweep.update(featurize=e, features=features)
            self.targets.hit_keys.append(keys["featurize"])
        else:
            e = execution(
                "featurize", "CACHED", cache_key=keys["featurize"], cached_from=sweep["featurize"]
            )
        features = sweep["features"]
        event(e, sweep["dataset"], "INPUT", "dataset")
        event(e, features, "OUTPUT", "features")
        self.targets.features.append(features)

        train_key = _key("train", run_id)
        if failed:
            error = {
                "error_type": "RuntimeError",
                "message": "CUDA out of memory",
                "traceback": "Traceback (most recent call last): ...",
                "exit_code": 1,
            }
            e = execution("train", "FAILED", inputs=params, cache_key=train_key, error=error)
            event(e, features, "INPUT", "features")
            execution("evaluate", "CANCELED")
            execution("report", "CANCELED")
        else:
            train = execution("train", "SUCCEEDED", inputs=params, cache_key=train_key)
            model = artifact("train", "model", "system.Model", train, framework="xgboost")
            event(train, features, "INPUT", "features")
            event(train, model, "OUTPUT", "model")
            self.targets.hit_keys.append(train_key)
            self.targets.models.append(model)
            e = execution("evaluate", "SUCCEEDED", cache_key=_key("evaluate", run_id))
            scores = {
                "accuracy": rng.uniform(0.7, 0.99),
                "loss": rng.uniform(0.01, 0.5),
                "auc": rng.uniform(0.7, 0.99),
            }
            metrics = artifact("evaluate", "metrics", "system.Metrics", e, **scores)
            event(e, model, "INPUT", "model")
            event(e, features, "INPUT", "features")
            event(e, metrics, "OUTPUT", "metrics")
            for name in METRIC_NAMES:
                rows.metrics.append(
                    {
                        "run_id": run_id,
                        "execution_id": e,
                        "artifact_id": metrics,
                        "name": name,
                        "value": scores[name],
                    }
                )
            e = execution("report", "SUCCEEDED", cache_key=_key("report", run_id))
            report = artifact("report", "report", "system.Markdown", e)
            event(e, model, "INPUT", "model")
            event(e, metrics, "INPUT", "metrics")
            event(e, report, "OUTPUT", "report")
            if self.targets.probe is None and not first:
                self.targets.probe = (model, train, raw["uri"])
        rows.runs.append(
            {
                "run_id": run_id,
                "pipeline_id": sweep["pipeline_id"],
                "state": "FAILED" if failed else "SUCCEEDED",
                "parameters": params,
                "pipeline_root": ROOT,
                "created_at": created,
                "finished_at": clock[0],
                "outputs": {} if failed else {"accuracy": round(scores["accuracy"], 4)},
                "error": None if not failed else {"task": "train", "error_type": "RuntimeError"},
                "engine_host": "bench-host",
                "engine_pid": 1000 + r,
            }
        )
        self.targets.run_ids.append(run_id)


_TASKS = ("ingest", "featurize", "train", "evaluate", "report")


def _tables() -> dict[str, Any]:
    """The store's tables (SQLAlchemy Core), whichever way `schema` declares them."""
    from headwater.metadata import schema

    metadata = getattr(schema, "METADATA", None)
    if metadata is None:
        metadata = schema.Base.metadata  # declarative models
    return dict(metadata.tables)


def _bulk_engine(url: str) -> Any:
    """A plain engine on the store's database, for the bulk inserts."""
    from sqlalchemy import create_engine, make_url

    parsed = make_url(url)
    if (
        parsed.drivername in ("postgres", "postgresql")
        and importlib.util.find_spec("psycopg2") is None
        and importlib.util.find_spec("psycopg") is not None
    ):
        parsed = parsed.set(drivername="postgresql+psycopg")  # as the store picks its driver
    return create_engine(parsed)


def fill(url: str, args: argparse.Namespace) -> tuple[Targets, dict[str, int], float]:
    """Create the schema through the store, then insert the runs; (targets, row counts, s)."""
    from sqlalchemy import func, insert, select, text

    from headwater.metadata import open_store

    store = open_store(url)  # creates and migrates the schema
    try:
        if store.list_runs(limit=1):
            raise BenchmarkError(
                f"the metadata store {url!r} already holds runs: point --url at an empty database"
            )
    finally:
        store.close()

    tables = _tables()
    rng = random.Random(args.seed)
    gen = Generator(args, rng, t0=time.time() - args.runs * 60.0)
    engine = _bulk_engine(url)
    t0 = time.perf_counter()
    try:
        with engine.begin() as conn:
            conn.execute(insert(tables["pipelines"]), gen.pipelines())
        for start in range(0, args.runs, _CHUNK_RUNS):
            rows = gen.chunk(start, min(args.runs, start + _CHUNK_RUNS))
            with engine.begin() as conn:
                for name in ("runs", "executions", "artifacts", "events", "metrics"):
                    if getattr(rows, name):
                        conn.execute(insert(tables[name]), getattr(rows, name))
            progress(f"  {min(args.runs, start + _CHUNK_RUNS)} runs")
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":  # explicit ids: move the sequences on
                for name in ("pipelines", "executions", "artifacts"):
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                            f"(SELECT MAX(id) FROM {name}))"
                        )
                    )
            counts = {
                name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                for name, table in tables.items()
                if name != "alembic_version"
            }
    finally:
        engine.dispose()
    return gen.targets, counts, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------------
# Queries.
# --------------------------------------------------------------------------------------------------


@dataclass
class QueryResult:
    name: str
    first: float
    times: list[float]
    size: str  # what one call returned, to show the query did its work
    target: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def p95(self) -> float:
        ordered = sorted(self.times)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.p95 < self.target


def _graph_size(graph: Any) -> str:
    kinds = [n["kind"] for n in graph.nodes]
    return (
        f"{len(graph.nodes)} nodes ({kinds.count('execution')} executions, "
        f"{kinds.count('artifact')} artifacts, {kinds.count('run')} runs), {len(graph.edges)} edges"
    )


def check_lineage(store: Any, targets: Targets) -> None:
    """The upstream lineage of one sweep member's model holds what the shape implies."""
    if targets.probe is None:
        return
    model, train, raw_uri = targets.probe
    graph = store.lineage(model, direction="upstream", depth=5)
    ids = {n["id"] for n in graph.nodes}
    uris = {n.get("uri") for n in graph.nodes}
    runs = [n for n in graph.nodes if n["kind"] == "run"]
    problems = []
    if f"e:{train}" not in ids:
        problems.append(f"its producer e:{train} is missing")
    if raw_uri not in uris:
        problems.append(f"the raw dataset {raw_uri} is missing")
    if len(runs) < 2:
        problems.append(f"{len(runs)} runs (expected the sweep's runs, >= 2)")
    if problems:
        raise BenchmarkError(
            f"lineage(a:{model}, upstream, depth=5) is not what the data implies: "
            f"{'; '.join(problems)} ({_graph_size(graph)})"
        )


def run_queries(store: Any, targets: Targets, args: argparse.Namespace) -> list[QueryResult]:
    rng = random.Random(args.seed + 1)
    prefix_ids = [r[:8] for r in targets.run_ids]
    miss_keys = [_key("never", i) for i in range(args.queries + 1)]

    def lineage(pool: list[int], direction: str, depth: int) -> Callable[[], Any]:
        return lambda: store.lineage(rng.choice(pool), direction=direction, depth=depth)

    def pipeline_runs() -> Any:
        return store.list_runs(pipeline=PIPELINE_NAMES[1], state="SUCCEEDED", limit=50)

    queries: list[tuple[str, Callable[[], Any], float | None]] = [
        ("lineage(model, upstream, depth=5)", lineage(targets.models, "upstream", 5), 1.0),
        ("lineage(features, downstream, depth=5)", lineage(targets.features, "downstream", 5), 1.0),
        ("lineage(model) as the CLI: both, depth=10", lineage(targets.models, "both", 10), None),
        (
            "lineage(shared raw dataset, downstream, depth=5)",
            lineage(targets.raws, "downstream", 5),
            None,
        ),
        ("list_runs(limit=50)", lambda: store.list_runs(limit=50), None),
        ("list_runs(pipeline, state=SUCCEEDED, limit=50)", pipeline_runs, None),
        ("get_run(full id)", lambda: store.get_run(rng.choice(targets.run_ids)), None),
        ("get_run(8-char prefix)", lambda: store.get_run(rng.choice(prefix_ids)), None),
        (
            "find_cached(recorded key): hit",
            lambda: store.find_cached(rng.choice(targets.hit_keys)),
            None,
        ),
        ("find_cached(unknown key): miss", lambda: store.find_cached(miss_keys.pop()), None),
    ]
    results = []
    for name, call, target in queries:
        progress(f"  {name} x {args.queries + 1}")
        times = []
        size = ""
        for i in range(args.queries + 1):
            t0 = time.perf_counter()
            value = call()
            times.append(time.perf_counter() - t0)
            if i == 0:
                size = _describe(value)
        results.append(
            QueryResult(
                name=name,
                first=times[0],
                times=times[1:],
                size=size,
                target=TARGET_LINEAGE_S if target else None,
            )
        )
    return results


def _describe(value: Any) -> str:
    if hasattr(value, "nodes"):
        return _graph_size(value)
    if isinstance(value, list):
        return f"{len(value)} runs"
    if value is None:
        return "None"
    return type(value).__name__


# --------------------------------------------------------------------------------------------------
# Report.
# --------------------------------------------------------------------------------------------------


def machine_info(url: str) -> dict[str, str]:
    from sqlalchemy import __version__ as sqlalchemy_version

    from headwater.metadata.sql import SqlMetadataStore

    return base_machine_info() | {
        "sqlalchemy": sqlalchemy_version,
        "sqlite": sqlite3.sqlite_version,
        "store": f"{SqlMetadataStore.__name__} at {_mask(url)}",
        "load average (1/5/15 min) at start": load_average(),
    }


def _in_memory(url: str) -> bool:
    from sqlalchemy import make_url

    parsed = make_url(url)
    database = parsed.database or ""
    return parsed.get_backend_name() == "sqlite" and (
        database in ("", ":memory:") or parsed.query.get("mode") == "memory"
    )


def _mask(url: str) -> str:
    from sqlalchemy import make_url

    with contextlib.suppress(Exception):
        return make_url(url).render_as_string(hide_password=True)
    return url


def _fmt_ms(x: float) -> str:
    return f"{x * 1000:.2f}" if x < 0.1 else f"{x * 1000:.0f}"


def report(
    info: dict[str, str],
    store_info: dict[str, str],
    results: list[QueryResult],
    markdown: bool,
) -> tuple[str, bool]:
    h = heading(markdown)
    parts = info_section("Machine", info, markdown) + info_section("Store", store_info, markdown)
    n = len(results[0].times) if results else 0
    rows = [
        [
            r.name,
            _fmt_ms(r.median),
            _fmt_ms(r.p95),
            _fmt_ms(max(r.times)),
            _fmt_ms(r.first),
            r.size,
        ]
        for r in results
    ]
    parts.append(f"{h}Queries (ms; median, p95 and max over {n} calls on random targets)")
    headers = ["query", "median", "p95", "max", "first call", "first call returned"]
    parts.append(table(headers, rows, markdown))
    ok = True
    target_rows = []
    for r in results:
        if r.passed is None:
            continue
        ok &= r.passed
        target_rows.append(
            [
                r.name,
                f"p95 < {TARGET_LINEAGE_S * 1000:.0f} ms",
                f"{_fmt_ms(r.p95)} ms",
                "PASS" if r.passed else "FAIL",
            ]
        )
    parts.append(f"{h}Target")
    parts.append(table(["query", "target", "measured", "result"], target_rows, markdown))
    return "\n\n".join(parts), ok


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Metadata store at scale: lineage and other queries on 10k realistic runs.",
    )
    p.add_argument("--runs", type=int, default=10_000, help="runs to generate (default 10000)")
    p.add_argument(
        "--url",
        help="SQLAlchemy URL of an empty database (default: a SQLite file in a temp directory)",
    )
    p.add_argument("--queries", type=int, default=50, help="timed calls per query (default 50)")
    p.add_argument(
        "--sweep",
        type=int,
        default=3,
        help="runs per sweep sharing cached data prep (default 3; 1: no cache hits)",
    )
    p.add_argument(
        "--shared-inputs", type=int, default=100, help="raw datasets the runs share (default 100)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--keep", action="store_true", help="keep the temporary SQLite file")
    add_report_options(p, strict_help="exit 2 if a target fails")
    args = p.parse_args(argv)
    if min(args.runs, args.queries, args.sweep, args.shared_inputs) < 1:
        p.error("--runs, --queries, --sweep and --shared-inputs must be >= 1")
    return args


@contextlib.contextmanager
def _database(args: argparse.Namespace) -> Iterator[tuple[str, Path | None]]:
    """The URL to fill, and the SQLite file when it is ours."""
    if args.url:
        yield args.url, None
        return
    if args.keep:
        path = Path(tempfile.mkdtemp(prefix="hw-bench-metadata-")) / "metadata.db"
        yield f"sqlite:///{path}", path
        return
    with tempfile.TemporaryDirectory(prefix="hw-bench-metadata-") as d:
        path = Path(d) / "metadata.db"
        yield f"sqlite:///{path}", path


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        with _database(args) as (url, path):
            if _in_memory(url):
                raise BenchmarkError("an in-memory SQLite store cannot be filled: use a file")
            info = machine_info(url)
            progress(f"filling {_mask(url)} with {args.runs} runs ...")
            targets, counts, fill_s = fill(url, args)
            from headwater.metadata import open_store

            t0 = time.perf_counter()
            store = open_store(url)
            open_s = time.perf_counter() - t0
            try:
                check_lineage(store, targets)
                results = run_queries(store, targets, args)
            finally:
                store.close()
            store_info = {
                "rows": ", ".join(f"{k} {v:,}" for k, v in counts.items()),
                "shape": f"{args.runs:,} runs of 5 executions, 5 output artifacts, 12 events; "
                f"sweeps of {args.sweep} (data prep CACHED after the first); "
                f"{args.shared_inputs} shared raw datasets",
                "filled in": f"{fill_s:.1f} s (bulk Core inserts)",
                "open_store on the filled store": f"{open_s * 1000:.0f} ms (incl. migration check)",
            }
            if path is not None:
                size = sum(
                    p.stat().st_size
                    for p in path.parent.iterdir()
                    if p.name.startswith(path.name) and p.is_file()
                )
                store_info["database size"] = f"{size / 2**20:.1f} MiB (with WAL)"
                if args.keep:
                    store_info["kept at"] = str(path)
    except BenchmarkError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    info["load average (1/5/15 min) at end"] = load_average()
    text, ok = report(info, store_info, results, args.markdown)
    raw = {
        "machine": info,
        "store": store_info,
        "queries": [
            {"query": r.name, "first_s": r.first, "times_s": r.times}
            | {"median_s": r.median, "p95_s": r.p95, "passed": r.passed}
            for r in results
        ],
        "target_passed": ok,
    }
    return finish(text, ok, args, raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
