"""Tests for resource requests read from compiled components."""

from collections.abc import Callable
from typing import Any

import pytest
from kfp import dsl

from headwater.engine.resources import resource_request
from headwater.errors import ResourceError
from headwater.spec.loader import ir_from_component
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import ResourceRequest

GiB = 2**30
MiB = 2**20


# -- requests from compiled components --------------------------------------------------------


@dsl.component(base_image="python:3.11")
def train() -> str:
    return "trained"


def compiled_resources(configure: Callable[[Any], Any]) -> dict[str, Any]:
    """The `resources` of the container a one-task pipeline compiles to."""

    @dsl.pipeline
    def one_task():
        configure(train())

    ir = ir_from_component(one_task)
    (executor,) = ir.executors.values()
    return dict(executor["container"].get("resources") or {})


@pytest.mark.parametrize(
    ("configure", "expected"),
    [
        (lambda t: t, ResourceRequest()),
        (lambda t: t.set_cpu_request("500m"), ResourceRequest(cpu=0.5)),
        (lambda t: t.set_cpu_limit("2"), ResourceRequest(cpu=2.0)),
        (lambda t: t.set_cpu_request("1").set_cpu_limit("4"), ResourceRequest(cpu=1.0)),
        (lambda t: t.set_memory_limit("2Gi"), ResourceRequest(memory=2 * GiB)),
        (lambda t: t.set_memory_request("1G"), ResourceRequest(memory=1e9)),
        (
            lambda t: t.set_memory_request("512Mi").set_memory_limit("4Gi"),
            ResourceRequest(memory=512 * MiB),
        ),
        (
            lambda t: t.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(2),
            ResourceRequest(accelerators=2, accelerator_type="nvidia.com/gpu"),
        ),
        (
            lambda t: (
                t.set_cpu_request("500m")
                .set_memory_limit("2Gi")
                .set_accelerator_type("nvidia.com/gpu")
                .set_accelerator_limit(1)
            ),
            ResourceRequest(
                cpu=0.5, memory=2 * GiB, accelerators=1, accelerator_type="nvidia.com/gpu"
            ),
        ),
    ],
    ids=[
        "none",
        "cpu-request",
        "cpu-limit",
        "request-wins-over-limit",
        "memory-limit",
        "memory-request",
        "memory-request-wins",
        "accelerator",
        "all",
    ],
)
def test_resource_request_from_compiled_component(
    configure: Callable[[Any], Any], expected: ResourceRequest
) -> None:
    request = resource_request(compiled_resources(configure), PlaceholderContext({}))
    assert request == expected


def test_resource_request_resolves_placeholders() -> None:
    @dsl.pipeline
    def sized(cpu: str, gpus: str):
        train().set_cpu_limit(cpu).set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(
            gpus
        )

    ir = ir_from_component(sized)
    (executor,) = ir.executors.values()
    ctx = PlaceholderContext(
        {"inputs": {"parameterValues": {"pipelinechannel--cpu": "3", "pipelinechannel--gpus": "2"}}}
    )
    request = resource_request(executor["container"]["resources"], ctx)
    assert request.cpu == 3.0
    assert request.accelerators == 2


def test_resource_request_resolves_an_accelerator_type_placeholder() -> None:
    @dsl.pipeline
    def typed(kind: str):
        train().set_accelerator_type(kind).set_accelerator_limit(1)

    ir = ir_from_component(typed)
    (executor,) = ir.executors.values()
    ctx = PlaceholderContext(
        {"inputs": {"parameterValues": {"pipelinechannel--kind": "example.com/tpu-v9"}}}
    )
    request = resource_request(executor["container"]["resources"], ctx)
    assert request.accelerator_type == "example.com/tpu-v9"
    assert request.accelerators == 1


@pytest.mark.parametrize("count", ["two", "-1", "1.5"], ids=repr)
def test_resource_request_rejects_a_bad_accelerator_count(count: str) -> None:
    with pytest.raises(ResourceError, match="bad accelerator count"):
        resource_request({"accelerator": {"resourceCount": count}}, PlaceholderContext({}))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"cpuLimit": 2.0, "memoryLimit": 1.5}, ResourceRequest(cpu=2.0, memory=1.5e9)),
        ({"cpuRequest": 0.5, "cpuLimit": 2.0}, ResourceRequest(cpu=0.5)),
        (
            {"accelerator": {"count": "1", "type": "TPU_V3"}},
            ResourceRequest(accelerators=1, accelerator_type="TPU_V3"),
        ),
    ],
    ids=["float-limits", "float-request-wins", "legacy-accelerator"],
)
def test_resource_request_from_float_fields(raw: dict[str, Any], expected: ResourceRequest) -> None:
    assert resource_request(raw, PlaceholderContext({})) == expected


def test_resource_request_rejects_bad_quantity() -> None:
    with pytest.raises(ResourceError, match="'lots'"):
        resource_request({"resourceMemoryLimit": "lots"}, PlaceholderContext({}))


# -- the pool ---------------------------------------------------------------------------------
