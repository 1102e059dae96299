"""A task's resource request (cpu, memory, accelerators), read from its compiled container."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.machine import parse_count, parse_cpu, parse_memory
from headwater.spec.placeholders import PlaceholderContext, resolve_string
from headwater.task import ResourceRequest


def resource_request(resources: Mapping[str, Any], ctx: PlaceholderContext) -> ResourceRequest:
    """Read a container's `resources` as the scheduler needs them.

    Requests win over limits, as on Kubernetes, where a missing request defaults to the limit.
    Values may be placeholders fed by pipeline inputs (`set_cpu_limit(cpu_param)`).
    """

    def pick(string_keys: tuple[str, ...], float_keys: tuple[str, ...]) -> Any:
        for key in string_keys:
            if resources.get(key):
                return resolve_string(str(resources[key]), ctx)
        for key in float_keys:
            if resources.get(key):
                return resources[key]
        return None

    cpu = pick(("resourceCpuRequest", "resourceCpuLimit"), ("cpuRequest", "cpuLimit"))
    mem_text = pick(("resourceMemoryRequest", "resourceMemoryLimit"), ())
    memory = parse_memory(mem_text) if mem_text is not None else 0.0
    if not memory:
        gb = resources.get("memoryRequest") or resources.get("memoryLimit")
        memory = float(gb) * 1e9 if gb else 0.0
    accel = resources.get("accelerator") or {}
    count_text = accel.get("resourceCount") or accel.get("count") or 0
    kind = accel.get("resourceType") or accel.get("type") or ""
    return ResourceRequest(
        cpu=parse_cpu(cpu) if cpu is not None else 0.0,
        memory=memory,
        accelerators=parse_count(resolve_string(str(count_text), ctx)) if count_text else 0,
        accelerator_type=resolve_string(str(kind), ctx) if kind else "",
    )


def resource_limits(resources: Mapping[str, Any], ctx: PlaceholderContext) -> tuple[float, float]:
    """A container's cpu and memory limits (cores, bytes; 0 for none), as a runtime enforces
    them: only limits, never requests, as on Kubernetes."""
    cpu_text = resources.get("resourceCpuLimit") or resources.get("cpuLimit")
    cpu = parse_cpu(resolve_string(str(cpu_text), ctx)) if cpu_text else 0.0
    mem_text = resources.get("resourceMemoryLimit")
    if mem_text:
        memory = parse_memory(resolve_string(str(mem_text), ctx))
    else:
        gb = resources.get("memoryLimit")
        memory = float(gb) * 1e9 if gb else 0.0
    return cpu, memory
