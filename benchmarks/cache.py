#!/usr/bin/env python
"""Cache benchmark: a cached 50-task rerun against the uncached first run.

Target from the issue: *a cached 50-task rerun takes under 5% of the uncached time*.

Workload: ``--chains`` (default 5) independent chains of ``--length`` (default 10) tasks, 50
tasks in all. Each chain starts with ``make_data``, which writes a ~15 KB CSV ``Dataset``; every
following ``transform`` reads the previous task's ``Dataset`` and writes a new one with one more
column. Every task also does ``--task-seconds`` (default 0.2) of "work": a ``time.sleep`` by
default (``--work sleep``), so the uncached time does not depend on how many cores the tasks
compete for, or a busy loop (``--work cpu``). Chained artifacts matter: a task's cache key covers
its input artifacts' *content*, so a rerun has to find each upstream digest before it can look
the task up.

Measured in this one process through the Python API (``headwater.run(pipeline_func, ...)``), after
an untimed warm-up run (imports, first compile), each repetition in a fresh ``HEADWATER_HOME``
(SQLite metadata store and artifacts inside it; ``HEADWATER_METADATA_URL`` and
``HEADWATER_PIPELINE_ROOT`` are ignored):

* ``uncached (first run)``: the first run in the fresh home (every task runs);
* ``cached rerun``: the same pipeline and arguments again: every task must be reported cached
  (checked: the benchmark aborts otherwise);
* ``no-cache rerun``: ``enable_cache=False`` in the now warm home (every task runs again), a
  second uncached figure without the cost of creating the store.

and through the CLI, ``python -m headwater run FILE --json`` timed as a whole process
(interpreter start, imports, compiling the ``.py``), uncached in a fresh home and then cached.
The report gives medians, the cached/uncached ratios, PASS/FAIL for the API ratio < 5%, and where
the time of a cached API rerun goes, from one more cached rerun with timers wrapped around the
engine's steps and the metadata store's calls, and from a diagnostic what-if: cached reruns
whose per-task metadata writes are skipped (the most that batching those writes could save).

Usage::

    python benchmarks/cache.py [--repeat 3] [--chains 5] [--length 10] [--task-seconds 0.2]
        [--work sleep|cpu] [--max-parallel N] [--no-cli] [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    add_report_options,
    base_machine_info,
    finish,
    fmt_s,
    heading,
    info_section,
    kfp_version,
    load_average,
    load_module,
    progress,
    table,
    tail,
)

TARGET_RATIO = 0.05  # cached rerun / uncached run, API

API_UNCACHED = "API: uncached (first run, fresh HEADWATER_HOME)"
API_CACHED = "API: cached rerun"
API_NOCACHE = "API: no-cache rerun (enable_cache=False, warm store)"
API_WHATIF = "API: cached rerun, recorder's per-task writes skipped (what-if, diagnostic)"
CLI_UNCACHED = "CLI: uncached (first run, fresh HEADWATER_HOME)"
CLI_CACHED = "CLI: cached rerun"

# Settings that would point a "fresh" HEADWATER_HOME at an old store or artifact root.
_IGNORED_ENV = ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT")

_PIPELINE_SOURCE = '''\
"""Headwater cache benchmark: {chains} chains of {length} tasks (made by benchmarks/cache.py)."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make_data(shard: int, seconds: float, busy: bool, out: Output[Dataset]):
    import time

    end = time.perf_counter() + seconds
    if busy:
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(seconds)
    with open(out.path, "w") as f:
        f.write("\\n".join(f"{{shard}},{{i}},{{i * i}}" for i in range(1000)))


@dsl.component
def transform(step: int, seconds: float, busy: bool, src: Input[Dataset], out: Output[Dataset]):
    import time

    end = time.perf_counter() + seconds
    if busy:
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(seconds)
    with open(src.path) as f:
        rows = f.read().splitlines()
    with open(out.path, "w") as f:
        f.write("\\n".join(f"{{row}},{{step}}" for row in rows))


@dsl.pipeline(name="hw-bench-cache")
def cache_pipeline(seconds: float = {seconds!r}, busy: bool = {busy!r}):
    for shard in range({chains}):
        data = make_data(shard=shard, seconds=seconds, busy=busy).outputs["out"]
        for step in range({length} - 1):
            data = transform(step=step, seconds=seconds, busy=busy, src=data).outputs["out"]
'''


class BenchmarkError(RuntimeError):
    """A run failed, or its tasks were not cached as expected."""


@dataclass
class Measurement:
    label: str
    n_tasks: int
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


# --------------------------------------------------------------------------------------------------
# The pipeline and its checks.
# --------------------------------------------------------------------------------------------------


def write_pipeline(directory: Path, args: argparse.Namespace) -> Path:
    path = directory / "cache_pipeline.py"
    path.write_text(
        _PIPELINE_SOURCE.format(
            chains=args.chains,
            length=args.length,
            seconds=float(args.task_seconds),
            busy=args.work == "cpu",
        )
    )
    return path


def load_pipeline_func(path: Path) -> Any:
    """The ``@dsl.pipeline`` object from the generated file (kfp needs the source on disk)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # kfp's default base_image notice
        module = load_module(path)  # module hw_bench_cache_pipeline
    return module.cache_pipeline


def _check_tasks(label: str, state: str, tasks: list[tuple[str, bool]], n: int, cached: bool):
    """The run succeeded with `n` executor tasks, all cached (or none)."""
    if state != "SUCCEEDED":
        raise BenchmarkError(f"{label}: run state is {state!r}, not 'SUCCEEDED'")
    if len(tasks) != n:
        raise BenchmarkError(f"{label}: {len(tasks)} tasks reported, expected {n}")
    wrong = [name for name, hit in tasks if hit != cached]
    if wrong:
        what = "not cached" if cached else "cached although they should have run"
        raise BenchmarkError(
            f"{label}: {len(wrong)} of {n} tasks {what}: {', '.join(sorted(wrong)[:8])}"
            + (", ..." if len(wrong) > 8 else "")
        )


# --------------------------------------------------------------------------------------------------
# Python API, in this process.
# --------------------------------------------------------------------------------------------------


def _api_run(func: Any, args: argparse.Namespace, label: str, cached: bool, **options: Any):
    import headwater

    t0 = time.perf_counter()
    run = headwater.run(func, {}, max_parallel=args.max_parallel, **options)
    seconds = time.perf_counter() - t0
    tasks = [(t.name, t.cached) for t in run.tasks]
    _check_tasks(label, run.state, tasks, args.chains * args.length, cached)
    return seconds


def api_round(func: Any, home: Path, args: argparse.Namespace, i: int) -> dict[str, float]:
    """One repetition: uncached in the fresh `home`, cached rerun, no-cache rerun."""
    os.environ["HEADWATER_HOME"] = str(home)
    out = {}
    for label, cached, options in (
        (API_UNCACHED, False, {}),
        (API_CACHED, True, {}),
        (API_NOCACHE, False, {"enable_cache": False}),
    ):
        progress(f"{label} (run {i + 1}/{args.repeat})")
        out[label] = _api_run(func, args, label, cached, **options)
        progress(f"  {out[label]:.3f} s")
    return out


def warm_up(func: Any, args: argparse.Namespace, home: Path) -> None:
    """Import and initialise everything once (SQLAlchemy, Alembic, kfp's compiler) untimed."""
    os.environ["HEADWATER_HOME"] = str(home)
    progress("warm-up (untimed) ...")
    _api_run(func, args, "warm-up", False)
    _api_run(func, args, "warm-up (cached)", True)


# --------------------------------------------------------------------------------------------------
# CLI, as a subprocess.
# --------------------------------------------------------------------------------------------------


def _child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _IGNORED_ENV}
    env["HEADWATER_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cli_run(path: Path, home: Path, args: argparse.Namespace, label: str, cached: bool) -> float:
    cmd = [sys.executable, "-m", "headwater", "run", str(path), "--json"]
    if args.max_parallel:
        cmd += ["--max-parallel", str(args.max_parallel)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=_child_env(home), timeout=args.timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"{label}: timed out after {args.timeout:.0f} s") from exc
    seconds = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        tasks = [(t["name"], bool(t["cached"])) for t in doc["tasks"]]
        state = doc["state"]
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(
            f"{label}: `{' '.join(cmd)}` exited {proc.returncode} without a JSON result "
            f"({exc!r})\n--- stdout ---\n{tail(proc.stdout, 30)}\n"
            f"--- stderr ---\n{tail(proc.stderr, 30)}"
        ) from exc
    _check_tasks(label, state, tasks, args.chains * args.length, cached)
    return seconds


def cli_round(path: Path, home: Path, args: argparse.Namespace, i: int) -> dict[str, float]:
    out = {}
    for label, cached in ((CLI_UNCACHED, False), (CLI_CACHED, True)):
        progress(f"{label} (run {i + 1}/{args.repeat})")
        out[label] = _cli_run(path, home, args, label, cached)
        progress(f"  {out[label]:.3f} s")
    return out


# --------------------------------------------------------------------------------------------------
# Where a cached rerun's time goes: timers wrapped around the engine's steps and store calls.
# --------------------------------------------------------------------------------------------------


class Probe:
    """Accumulate calls and seconds per (step, thread) while patched in."""

    def __init__(self) -> None:
        self.stats: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])

    def _wrap(self, fn: Callable[..., Any], step: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                main = threading.current_thread() is threading.main_thread()
                entry = self.stats[(step, "engine" if main else "recorder")]
                entry[0] += 1
                entry[1] += time.perf_counter() - t0

        return timed

    @contextlib.contextmanager
    def patched(self, targets: list[tuple[Any, str, str]]) -> Iterator[None]:
        saved = []
        try:
            for owner, attr, step in targets:
                if attr not in vars(owner):  # renamed in the engine: that row stays empty
                    progress(f"note: no {getattr(owner, '__name__', owner)}.{attr} to time")
                    continue
                original = vars(owner)[attr]
                saved.append((owner, attr, original))
                setattr(owner, attr, self._wrap(getattr(owner, attr), step))
            yield
        finally:
            for owner, attr, original in reversed(saved):
                setattr(owner, attr, original)

    def get(self, step: str, thread: str = "engine") -> tuple[int, float]:
        calls, seconds = self.stats.get((step, thread), (0, 0.0))
        return int(calls), seconds


def _probe_targets() -> list[tuple[Any, str, str]]:
    from headwater.api import running
    from headwater.caching.store import StoreTaskCache
    from headwater.engine import runner
    from headwater.engine.loop import EngineLoop
    from headwater.engine.recorder import MetadataRecorder
    from headwater.executors import packages
    from headwater.executors.local import LocalExecutor
    from headwater.metadata.sql import SqlMetadataStore
    from headwater.spec import loader

    targets: list[tuple[Any, str, str]] = [
        (running, "executor_for", "start the fork server"),
        (loader, "load_pipeline", "load and compile the pipeline"),
        (packages, "prepare_packages", "check packages_to_install"),
        (runner, "open_metadata", "open the metadata store"),
        (EngineLoop, "run", "engine loop"),
        (StoreTaskCache, "fingerprint", "cache keys"),
        (StoreTaskCache, "lookup", "cache lookups"),
        (MetadataRecorder, "flush", "wait for the metadata writes"),
        (LocalExecutor, "shutdown", "stop the fork server"),
    ]
    for method in (
        "get_artifact",
        "cached_outputs",
        "create_run",
        "record_execution",
        "insert_executions",
        "record_artifact",
        "record_events",
        "finish_run",
    ):
        if hasattr(SqlMetadataStore, method):
            targets.append((SqlMetadataStore, method, f"store.{method}"))
    return targets


def profile_cached_rerun(func: Any, home: Path, args: argparse.Namespace) -> list[list[str]]:
    """One more cached rerun in `home` with timers; rows for the breakdown table."""
    os.environ["HEADWATER_HOME"] = str(home)
    probe = Probe()
    progress("cached rerun with timers (breakdown) ...")
    with probe.patched(_probe_targets()):
        total = _api_run(func, args, "cached rerun (timed steps)", True)
    progress(f"  {total:.3f} s")

    rows: list[list[str]] = []

    def row(thread: str, step: str, key: str | None = None, seconds: float | None = None) -> float:
        calls, secs = probe.get(key or step, thread) if seconds is None else (0, seconds)
        per_call = f"{secs / calls * 1000:.2f}" if calls else ""
        rows.append(
            [
                thread,
                step,
                str(calls) if calls else "",
                f"{secs * 1000:.1f}",
                per_call,
                f"{secs / total * 100:.1f}%",
            ]
        )
        return secs

    accounted = 0.0
    for step in (
        "start the fork server",
        "load and compile the pipeline",
        "check packages_to_install",
        "open the metadata store",
    ):
        accounted += row("engine", step)
    loop = row("engine", "engine loop")
    accounted += loop
    keys = row("engine", "... cache keys", "cache keys")
    row("engine", "... ... store.get_artifact (input digests)", "store.get_artifact")
    lookups = row("engine", "... cache lookups", "cache lookups")
    row("engine", "... ... store.cached_outputs", "store.cached_outputs")
    flush = row("engine", "... wait for the metadata writes", "wait for the metadata writes")
    row(
        "engine",
        "... rest of the loop (scheduling, hooks, run.json)",
        seconds=loop - keys - lookups - flush,
    )
    accounted += row("engine", "stop the fork server")
    row("engine", "rest (arguments, stores, state machine)", seconds=total - accounted)
    row("engine", "total (this instrumented run)", seconds=total)
    busy = 0.0
    for method in (
        "create_run",
        "record_execution",
        "insert_executions",
        "get_artifact",
        "record_artifact",
        "record_events",
        "finish_run",
    ):
        if probe.get(f"store.{method}", "recorder")[0]:
            busy += row("recorder", f"store.{method}")
    row("recorder", "recorder thread busy (sum)", seconds=busy)
    return rows


def whatif_without_recording(func: Any, home: Path, args: argparse.Namespace) -> list[float]:
    """Cached reruns whose tasks the recorder does not write (the run itself still is).

    Diagnostic only: it shows how much of a cached rerun the per-task metadata writes cost,
    that is, the most that batching them could save. Runs last: the executions it leaves
    unrecorded matter to no later measurement.
    """
    from headwater.engine.recorder import MetadataRecorder

    os.environ["HEADWATER_HOME"] = str(home)
    names = [n for n in ("_record_task", "_record_hits") if n in vars(MetadataRecorder)]
    if not names:
        progress("note: the recorder's per-task writers are gone: what-if skipped")
        return []
    originals = {n: vars(MetadataRecorder)[n] for n in names}
    for name in names:
        setattr(MetadataRecorder, name, lambda self, run_id, snaps: None)
    try:
        times = []
        for i in range(args.repeat):
            progress(f"{API_WHATIF} (run {i + 1}/{args.repeat})")
            times.append(_api_run(func, args, API_WHATIF, True))
            progress(f"  {times[-1]:.3f} s")
        return times
    finally:
        for name, original in originals.items():
            setattr(MetadataRecorder, name, original)


# --------------------------------------------------------------------------------------------------
# Report.
# --------------------------------------------------------------------------------------------------


def machine_info(args: argparse.Namespace) -> dict[str, str]:
    from headwater.executors.admission import default_parallelism
    from headwater.machine import machine_cpus

    parallel = args.max_parallel or default_parallelism(machine_cpus())
    return base_machine_info() | {
        "kfp": kfp_version(),
        "sqlite": sqlite3.sqlite_version,
        "workload": f"{args.chains} chains x {args.length} tasks = {args.chains * args.length} "
        f"tasks, each {args.task_seconds} s of {args.work} work + a ~15-40 KB Dataset in/out",
        "max parallel tasks": f"{parallel}" + ("" if args.max_parallel else " (engine default)"),
        "load average (1/5/15 min) at start": load_average(),
    }


def report(
    results: dict[str, Measurement],
    info: dict[str, str],
    breakdown: list[list[str]],
    markdown: bool,
) -> tuple[str, bool]:
    """The report, and whether the target passed."""
    h = heading(markdown)
    parts = info_section("Machine", info, markdown)

    rows = []
    for m in results.values():
        cached = m.n_tasks if m.label in (API_CACHED, API_WHATIF, CLI_CACHED) else 0
        lo, hi = min(m.times), max(m.times)
        rows.append(
            [
                m.label,
                f"{cached}/{m.n_tasks}",
                str(len(m.times)),
                fmt_s(m.median),
                f"{fmt_s(lo)}-{fmt_s(hi)}",
            ]
        )
    parts.append(f"{h}Wall time (median of runs)")
    parts.append(table(["run", "cached tasks", "runs", "median s", "min-max s"], rows, markdown))

    def ratio(num: str, den: str) -> float | None:
        if num in results and den in results:
            return results[num].median / results[den].median
        return None

    ratio_rows = []
    for num, den in (
        (API_CACHED, API_UNCACHED),
        (API_CACHED, API_NOCACHE),
        (API_WHATIF, API_UNCACHED),
        (CLI_CACHED, CLI_UNCACHED),
    ):
        r = ratio(num, den)
        if r is not None:
            ratio_rows.append([f"{num} / {den}", f"{r * 100:.1f}%"])
    parts.append(f"{h}Cached / uncached (medians)")
    parts.append(table(["ratio", "value"], ratio_rows, markdown))

    api = ratio(API_CACHED, API_UNCACHED)
    ok = api is not None and api < TARGET_RATIO
    target_rows = [
        [
            "API",
            f"cached rerun < {TARGET_RATIO * 100:.0f}% of the uncached run",
            "n/a" if api is None else f"{api * 100:.1f}%",
            "PASS" if ok else "FAIL",
        ]
    ]
    cli = ratio(CLI_CACHED, CLI_UNCACHED)
    if cli is not None:
        target_rows.append(
            [
                "CLI (whole process)",
                "reported only (includes interpreter start, imports, compiling the .py)",
                f"{cli * 100:.1f}%",
                "-",
            ]
        )
    parts.append(f"{h}Target")
    parts.append(table(["runner", "target", "measured", "result"], target_rows, markdown))

    if breakdown:
        parts.append(f"{h}Where a cached API rerun's time goes (one more rerun, timers on)")
        headers = ["thread", "step", "calls", "total ms", "ms per call", "of run"]
        parts.append(table(headers, breakdown, markdown))
        parts.append(
            "The recorder thread writes the run's metadata in the background; the engine waits "
            'for it only at the end ("wait for the metadata writes").'
        )
    return "\n\n".join(parts), ok


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Cache: time of a cached 50-task rerun against the uncached first run.",
    )
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median)")
    p.add_argument("--chains", type=int, default=5, help="independent chains (default 5)")
    p.add_argument("--length", type=int, default=10, help="tasks per chain (default 10)")
    p.add_argument(
        "--task-seconds", type=float, default=0.2, help="work per task in seconds (default 0.2)"
    )
    p.add_argument(
        "--work",
        choices=["sleep", "cpu"],
        default="sleep",
        help="what a task's work is: time.sleep (default) or a busy loop",
    )
    p.add_argument(
        "--max-parallel", type=int, help="most tasks at once (default: the engine's default)"
    )
    p.add_argument("--no-cli", action="store_true", help="skip the CLI measurements")
    p.add_argument(
        "--no-breakdown",
        action="store_true",
        help="skip the instrumented cached rerun and the what-if reruns",
    )
    p.add_argument("--timeout", type=float, default=600, help="per CLI run, seconds")
    add_report_options(p, strict_help="exit 2 if the target fails")
    args = p.parse_args(argv)
    if min(args.repeat, args.chains, args.length) < 1:
        p.error("--repeat, --chains and --length must be >= 1")
    if args.task_seconds < 0:
        p.error("--task-seconds must be >= 0")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    for name in _IGNORED_ENV:
        if os.environ.pop(name, None) is not None:
            progress(f"note: ignoring {name}: every run uses the store in its HEADWATER_HOME")
    saved_home = os.environ.get("HEADWATER_HOME")
    info = machine_info(args)
    n_tasks = args.chains * args.length
    labels = [API_UNCACHED, API_CACHED, API_NOCACHE]
    if not args.no_cli:
        labels += [CLI_UNCACHED, CLI_CACHED]
    results = {label: Measurement(label, n_tasks) for label in labels}
    breakdown: list[list[str]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="hw-bench-cache-") as d:
            tmp = Path(d)
            path = write_pipeline(tmp, args)
            func = load_pipeline_func(path)
            warm_up(func, args, tmp / "home-warmup")
            for i in range(args.repeat):
                for label, secs in api_round(func, tmp / f"home-api-{i}", args, i).items():
                    results[label].times.append(secs)
                if not args.no_cli:
                    for label, secs in cli_round(path, tmp / f"home-cli-{i}", args, i).items():
                        results[label].times.append(secs)
            if not args.no_breakdown:
                home = tmp / f"home-api-{args.repeat - 1}"
                breakdown = profile_cached_rerun(func, home, args)
                whatif = whatif_without_recording(func, home, args)
                if whatif:
                    results[API_WHATIF] = Measurement(API_WHATIF, n_tasks, whatif)
    except BenchmarkError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if saved_home is None:
            os.environ.pop("HEADWATER_HOME", None)
        else:
            os.environ["HEADWATER_HOME"] = saved_home

    info["load average (1/5/15 min) at end"] = load_average()
    text, ok = report(results, info, breakdown, args.markdown)
    raw = {
        "machine": info,
        "results": [
            {"run": m.label, "n_tasks": m.n_tasks, "times_s": m.times} | {"median_s": m.median}
            for m in results.values()
        ],
        "breakdown": breakdown,
        "target_passed": ok,
    }
    return finish(text, ok, args, raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
