"""RunOptions: one frozen object for how a run goes; bad options are refused in one line."""

from __future__ import annotations

import dataclasses

import pytest

import headwater
from headwater.engine.options import RunOptions
from headwater.errors import UserError
from headwater.executors.local import LocalExecutor
from headwater.executors.registry import create_executor


def test_build_sets_run_fields_and_keeps_the_rest_as_executor_options() -> None:
    options = RunOptions.build(executor="dask", max_parallel=3, scheduler="tcp://h:8786")
    assert options.executor == "dask"
    assert options.max_parallel == 3
    assert options.executor_options == {"scheduler": "tcp://h:8786"}
    assert options.enable_cache is True  # a default untouched


def test_build_starts_from_given_options_and_drops_unset_executor_options() -> None:
    base = RunOptions(executor="dask", executor_options={"shared_fs": True}, enable_cache=False)
    options = RunOptions.build(base, scheduler=None, max_parallel=2)
    assert options.executor_options == {"shared_fs": True}
    assert (options.enable_cache, options.max_parallel) == (False, 2)
    assert base.max_parallel is None  # the base is not changed


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunOptions().max_parallel = 2  # type: ignore[misc]


def test_a_misspelt_option_names_the_run_and_executor_options() -> None:
    with pytest.raises(UserError) as info:
        RunOptions.build(executor="dask", max_paralel=2)
    message = str(info.value)
    assert "unknown option 'max_paralel'" in message
    assert "max_parallel" in message and "scheduler, shared_fs" in message
    assert "\n" not in message


def test_the_local_executor_has_no_scheduler() -> None:
    with pytest.raises(UserError, match=r"unknown option 'scheduler'.*'local' has"):
        RunOptions.build(scheduler="tcp://h:8786")


def test_executor_options_need_an_executor_given_by_name() -> None:
    with LocalExecutor() as executor, pytest.raises(UserError, match="given by name"):
        RunOptions.build(executor=executor, scheduler="tcp://h:8786")


def test_max_parallel_below_one_is_refused() -> None:
    with pytest.raises(UserError, match="--max-parallel must be at least 1, got 0"):
        RunOptions.build(max_parallel=0)


def test_the_api_refuses_a_misspelt_option_before_loading_anything() -> None:
    with pytest.raises(UserError, match="unknown option 'enable_cahce'"):
        headwater.run("no-such-pipeline.py", enable_cahce=False)


@pytest.mark.parametrize(
    ("name", "options", "known"),
    [
        ("dask", {"schedular": "x"}, "install_packages, scheduler, shared_fs"),
        ("local", {"shared_fs": True}, "install_packages, sandboxed, server"),
    ],
    ids=["dask", "local"],
)
def test_a_built_in_executor_refuses_an_option_it_does_not_have(
    name: str, options: dict[str, object], known: str
) -> None:
    with pytest.raises(UserError) as info:
        create_executor(name, **options)
    assert str(info.value) == (
        f"executor {name!r} has no option {next(iter(options))!r} (its options: {known})"
    )
