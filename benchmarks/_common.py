"""Helpers shared by the benchmark scripts.

The scripts run as ``python benchmarks/SCRIPT.py``, which puts this directory first on
``sys.path``: they import this module as ``_common``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def progress(text: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    print(text, file=sys.stderr, flush=True)


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def kfp_version() -> str:
    try:
        from importlib.metadata import version

        return version("kfp")
    except Exception:
        return "not installed"


def base_machine_info() -> dict[str, str]:
    """CPUs, CPU model, OS and Python: the first lines of every report's machine section."""
    cpu_model = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    return {
        "nproc": f"{affinity} (cpu_count {os.cpu_count()})",
        "cpu": cpu_model,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_version()} ({sys.executable})",
    }


def load_module(path: Path) -> Any:
    """Import the Python file at `path` as module ``hw_bench_<stem>``."""
    spec = importlib.util.spec_from_file_location(f"hw_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def tail(text: str, lines: int = 40) -> str:
    """The last `lines` lines of `text`."""
    return "\n".join(text.splitlines()[-lines:])


def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def heading(markdown: bool) -> str:
    """What a report puts before a section title."""
    return "### " if markdown else ""


def info_section(title: str, items: dict[str, str], markdown: bool) -> list[str]:
    """A report section (title, then one ``key: value`` bullet per item) as two parts."""
    bullet = "- " if markdown else "  "
    return [
        f"{heading(markdown)}{title}",
        "\n".join(f"{bullet}{k}: {v}" for k, v in items.items()),
    ]


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    """A Markdown table, or a plain one with aligned columns."""
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([fmt(headers), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def add_report_options(p: argparse.ArgumentParser, strict_help: str) -> None:
    """The options every benchmark ends with: --markdown, --json-out and --strict."""
    p.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    p.add_argument("--json-out", type=Path, help="also write raw timings as JSON to this file")
    p.add_argument("--strict", action="store_true", help=strict_help)


def finish(text: str, passed: bool, args: argparse.Namespace, raw: dict[str, Any]) -> int:
    """Print the report, write `raw` to --json-out if given; the exit status.

    The status is 2 with --strict when a target failed, else 0.
    """
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(raw, indent=2))
    return 2 if args.strict and not passed else 0
