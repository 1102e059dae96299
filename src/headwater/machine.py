"""Facts about this machine (CPUs, memory, GPUs) and Kubernetes resource quantities.

Below the engine, the executors and the components, which all size work to the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

from headwater.errors import ResourceError

_MEMORY_UNITS = {
    "": 1,
    "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18,
    "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50, "ei": 2**60,
}  # fmt: skip


def parse_cpu(text: Any) -> float:
    """Kubernetes CPU quantity to cores: '500m' -> 0.5, '2' -> 2.0."""
    value = str(text).strip()
    try:
        return float(value[:-1]) / 1000 if value.endswith("m") else float(value)
    except ValueError as exc:
        raise ResourceError(
            f"bad CPU quantity {value!r}: use cores ('2', '0.5') or '500m'"
        ) from exc


def parse_memory(text: Any) -> float:
    """Kubernetes memory quantity to bytes: '1G' -> 1e9, '512Mi' -> 536870912."""
    value = str(text).strip()
    match = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]*)", value)
    unit = match.group(2).lower().removesuffix("b") if match else None
    if match is None or unit not in _MEMORY_UNITS:
        raise ResourceError(f"bad memory quantity {value!r}: use e.g. '512Mi', '1G', '2Gi'")
    return float(match.group(1)) * _MEMORY_UNITS[unit]


def parse_count(text: Any) -> int:
    """An accelerator count: a whole number, at least 0 ('2', '2.0')."""
    value = str(text).strip()
    try:
        count = float(value)
    except ValueError:
        count = -1.0
    if count < 0 or not count.is_integer():
        raise ResourceError(f"bad accelerator count {value!r}: use a whole number such as '1'")
    return int(count)


def detect_gpus() -> list[str]:
    """Indices of the NVIDIA GPUs this process may use (CUDA_VISIBLE_DEVICES, else nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def machine_memory() -> float:
    """Physical memory in bytes (0 when unknown)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return 0.0


def machine_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
