"""The Dask executor's rules that need no cluster: where a local root may be used, and how a
task directory moves into a worker's scratch space."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from headwater.errors import UserError
from headwater.executors.dask_cluster import local_addresses, refuse_local_root
from headwater.executors.dask_worker import relocate
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest


def test_workers_on_this_host_may_use_a_local_root() -> None:
    here = local_addresses()
    assert "127.0.0.1" in here
    refuse_local_root("/data/root", ["127.0.0.1", "127.0.0.1"], here)


@pytest.mark.parametrize(
    "host", ["127.0.0.2", "127.1.2.3", "::1", "[::1]", "localhost"], ids=lambda h: h
)
def test_every_loopback_address_is_this_host(host: str) -> None:
    # No interface lists 127.0.0.2, yet a worker listening there is on this machine.
    refuse_local_root("/data/root", [host], {"127.0.0.1"})


def test_a_worker_on_another_host_refuses_a_local_root_naming_it() -> None:
    with pytest.raises(UserError) as caught:
        refuse_local_root("/data/root", ["127.0.0.1", "10.9.8.7"], {"127.0.0.1"})
    message = str(caught.value)
    assert "10.9.8.7" in message and "'/data/root'" in message
    assert "s3://" in message and "--shared-fs" in message


def _launch(workdir: Path) -> Launch:
    outputs = {
        "parameters": {"n": {"outputFile": str(workdir / "outputs" / "n")}},
        "artifacts": {},
        "outputFile": str(workdir / "executor_output.json"),
    }
    executor_input = {"inputs": {"parameterValues": {"p": str(workdir)}}, "outputs": outputs}
    return Launch(
        task_id=1,
        name="t",
        component="comp-t",
        executor_label="exec-t",
        container={"command": ["sh", "-c", "true"]},
        executor_input=executor_input,
        placeholders=PlaceholderContext(executor_input=executor_input, workspace_path="/w"),
        workdir=workdir,
        log_path=workdir / "log.txt",
        env={},
        resources=ResourceRequest(),
        output_types={"n": "NUMBER_INTEGER"},
    )


def test_relocate_moves_every_path_under_the_task_directory_and_nothing_else(
    tmp_path: Path,
) -> None:
    old = tmp_path / "runs" / "r1" / "tasks" / "t"
    new = tmp_path / "scratch" / "t"
    moved = relocate(_launch(old), new)
    assert moved.workdir == new and moved.log_path == new / "log.txt"
    outputs = moved.executor_input["outputs"]
    assert outputs["outputFile"] == str(new / "executor_output.json")
    assert outputs["parameters"]["n"]["outputFile"] == str(new / "outputs" / "n")
    assert moved.placeholders.executor_input == moved.executor_input
    # A value that is the old path itself moves too; a sibling that only shares a prefix and
    # paths elsewhere do not.
    assert moved.executor_input["inputs"]["parameterValues"]["p"] == str(new)
    sibling = dataclasses.replace(_launch(old), log_path=Path(str(old) + "-2") / "log.txt")
    assert relocate(sibling, new).log_path == Path(str(old) + "-2") / "log.txt"
    assert moved.placeholders.workspace_path == "/w"
