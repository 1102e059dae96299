"""Tests for the ResourcePool that admits tasks to this machine."""

from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.errors import ResourceError
from headwater.executors.admission import ResourcePool
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest

GiB = 2**30


LaunchFactory = Callable[..., Launch]


@pytest.fixture
def make_launch(tmp_path: Path) -> LaunchFactory:
    """Launches that differ only in what they request."""
    counter = iter(range(1, 1000))

    def make(cpu: float = 0.0, memory: float = 0.0, gpus: int = 0, gpu_type: str = "") -> Launch:
        task_id = next(counter)
        return Launch(
            task_id=task_id,
            name=f"task-{task_id}",
            component="comp-task",
            executor_label="exec-task",
            container={},
            executor_input={},
            placeholders=PlaceholderContext({}),
            workdir=tmp_path / str(task_id),
            log_path=tmp_path / str(task_id) / "log.txt",
            env={},
            resources=ResourceRequest(cpu, memory, gpus, gpu_type),
            output_types={},
        )

    return make


def test_pool_bounds_slots(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=2, cpu=8, memory=0)
    first, second, third = make_launch(), make_launch(), make_launch()
    assert pool.try_acquire(first)
    assert pool.try_acquire(second)
    assert not pool.try_acquire(third)
    pool.release(first.task_id)
    assert pool.try_acquire(third)


def test_pool_bounds_cpu(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=8, cpu=1.5, memory=0)
    first, second = make_launch(cpu=1.0), make_launch(cpu=1.0)
    assert pool.try_acquire(first)
    assert not pool.try_acquire(second)
    assert not pool.try_acquire(second)  # still waiting, nothing leaked by the refusal
    pool.release(first.task_id)
    assert pool.try_acquire(second)


def test_pool_admits_tasks_without_requests_beside_a_full_cpu(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=4, cpu=1.0, memory=0)
    assert pool.try_acquire(make_launch(cpu=1.0))
    assert pool.try_acquire(make_launch())
    assert pool.try_acquire(make_launch())


def test_pool_bounds_memory(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=4 * GiB)
    first, second = make_launch(memory=3 * GiB), make_launch(memory=2 * GiB)
    assert pool.try_acquire(first)
    assert not pool.try_acquire(second)
    pool.release(first.task_id)
    assert pool.try_acquire(second)


def test_pool_ignores_memory_when_machine_memory_is_unknown(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=0)
    assert pool.try_acquire(make_launch(memory=100 * GiB))
    assert pool.try_acquire(make_launch(memory=100 * GiB))


@pytest.mark.parametrize(
    "oversize",
    [{"cpu": 64.0}, {"memory": 1024 * GiB}],
    ids=["cpu", "memory"],
)
def test_pool_clamps_oversize_requests_so_they_run_alone(
    make_launch: LaunchFactory, oversize: dict[str, float]
) -> None:
    pool = ResourcePool(slots=8, cpu=4, memory=8 * GiB)
    big = make_launch(**oversize)
    small = make_launch(cpu=1.0, memory=1 * GiB)
    assert pool.try_acquire(big)
    assert not pool.try_acquire(small)
    pool.release(big.task_id)
    assert pool.try_acquire(small)


def test_pool_assigns_gpus_by_index(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=0, gpus=["0", "1", "2"])
    pair, another_pair, single = make_launch(gpus=2), make_launch(gpus=2), make_launch(gpus=1)
    assert pool.try_acquire(pair)
    assert pool.device_env(pair.task_id) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert "CUDA_VISIBLE_DEVICES" not in pair.env  # devices are not part of the cache key
    assert not pool.try_acquire(another_pair)
    assert pool.device_env(another_pair.task_id) == {}
    assert pool.try_acquire(single)
    assert pool.device_env(single.task_id) == {"CUDA_VISIBLE_DEVICES": "2"}
    pool.release(pair.task_id)
    assert pool.device_env(pair.task_id) == {}
    assert pool.try_acquire(another_pair)
    assert pool.device_env(another_pair.task_id) == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_pool_leaves_gpu_env_alone_for_cpu_tasks(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=0, gpus=["0"])
    launch = make_launch(cpu=1.0)
    assert pool.try_acquire(launch)
    assert pool.device_env(launch.task_id) == {}


@pytest.mark.parametrize(
    ("gpus", "wanted"),
    [([], 1), (["0", "1"], 4)],
    ids=["no-gpus", "too-few"],
)
def test_strict_pool_check_rejects_more_gpus_than_the_machine_has(
    make_launch: LaunchFactory, gpus: list[str], wanted: int
) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=0, gpus=gpus, strict=True)
    launch = make_launch(gpus=wanted, gpu_type="nvidia.com/gpu")
    with pytest.raises(ResourceError) as info:
        pool.check(launch)
    message = str(info.value)
    assert launch.name in message
    assert f"{wanted} accelerator(s)" in message
    assert "'nvidia.com/gpu'" in message
    assert f"has {len(gpus)}" in message
    assert "set_accelerator_limit" in message


@pytest.mark.parametrize(
    ("request_", "setter"),
    [({"cpu": 16.0}, "set_cpu_limit"), ({"memory": 64 * GiB}, "set_memory_limit")],
    ids=["cpu", "memory"],
)
def test_strict_pool_check_rejects_oversize_cpu_and_memory(
    make_launch: LaunchFactory, request_: dict[str, float], setter: str
) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=32 * GiB, strict=True)
    with pytest.raises(ResourceError, match=setter):
        pool.check(make_launch(**request_))
    # Not strict, the same request is clamped to the machine (and runs alone).
    assert ResourcePool(slots=8, cpu=8, memory=32 * GiB).check(make_launch(**request_)) is None


@pytest.mark.parametrize(
    ("gpus", "wanted", "says"),
    [
        ([], 1, "has none: running it without"),
        (["0", "1"], 4, "has 2: running it with those 2"),
    ],
    ids=["no-gpus", "too-few"],
)
def test_pool_runs_a_task_wanting_more_gpus_with_what_there_is_after_one_warning(
    make_launch: LaunchFactory, gpus: list[str], wanted: int, says: str
) -> None:
    pool = ResourcePool(slots=8, cpu=8, memory=0, gpus=gpus)
    launch = make_launch(gpus=wanted, gpu_type="nvidia.com/gpu")

    warning = pool.check(launch)

    assert warning is not None
    assert launch.name in warning
    assert f"requests {wanted} accelerator(s) of type 'nvidia.com/gpu'" in warning
    assert says in warning
    assert "--strict-resources" in warning
    assert "\n" not in warning
    # Once per task: a retry of the same task is not warned about again.
    assert pool.check(launch) is None
    # Admitted with what there is (the integration tests check what the task then sees).
    assert pool.try_acquire(launch)


def test_pool_check_accepts_what_fits(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=1, cpu=1, memory=0, gpus=["0", "1"])
    assert pool.check(make_launch(gpus=2)) is None
    assert pool.check(make_launch(cpu=100.0)) is None
    strict = ResourcePool(slots=1, cpu=1, memory=0, gpus=["0", "1"], strict=True)
    assert strict.check(make_launch(gpus=2, cpu=1.0)) is None


def test_release_of_unknown_task_is_harmless(make_launch: LaunchFactory) -> None:
    pool = ResourcePool(slots=1, cpu=1, memory=0)
    pool.release(12345)
    assert pool.try_acquire(make_launch(cpu=1.0))


# -- the machine ------------------------------------------------------------------------------
