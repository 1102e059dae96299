"""Tasks in their images everywhere a task runs: Python components (`always`) with their
packages, an S3 pipeline root, the Dask test cluster, and `headwater server` with kfp.Client.

No `from __future__ import annotations`: kfp reads the components' annotations as types.
"""

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, run_ok
from container_images import IMAGE_TEXT, PODMAN, PYTHON, containers_with, image_id, needs_podman
from dask_cluster import DaskCluster
from kfp import dsl
from kfp.dsl import Dataset, Input, Output
from server_harness import kfp_client, running_server, wait_state
from test_package_envs import private_index, wheel

import headwater
from headwater.api.runs import get_run

pytestmark = [pytest.mark.integration, needs_podman]

sys.path.insert(0, str(Path(__file__).parent / "pipelines"))
import in_images  # noqa: E402

sys.path.pop(0)

EXPECTED = f"{IMAGE_TEXT.strip()} | from the host + in the image"


@dsl.component(base_image=PYTHON)
def where_am_i(data: Output[Dataset]) -> str:
    import os
    import sys

    with open(data.path, "w") as fh:
        fh.write(sys.executable)
    return f"{sys.executable} kit={os.path.isdir('/headwater/kit')}"


@dsl.component(base_image=PYTHON)
def read_back(data: Input[Dataset]) -> str:
    with open(data.path) as fh:
        return fh.read()


def test_always_runs_python_components_in_their_image_with_their_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python_image: str
) -> None:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    wheel(tmp_path / "index", "hwtestpkg", "from the private index")
    with private_index(tmp_path / "index") as url:

        @dsl.component(base_image=PYTHON, packages_to_install=["hwtestpkg"],
                       pip_index_urls=[url])  # fmt: skip
        def uses_package() -> str:
            import sys

            import hwtestpkg

            return f"{hwtestpkg.VALUE} on {sys.version_info[:2]}"

        @dsl.pipeline(name="python-in-image")
        def python_in_image() -> str:
            where = where_am_i()
            read_back(data=where.outputs["data"])
            return uses_package().output

        run = headwater.run(python_in_image, containers="always")
        assert run.state == "SUCCEEDED", run.error
        assert run.outputs["Output"].startswith("from the private index on (3,")
        # Built once into the image's own environment; a second run reuses it.
        built = list((tmp_path / "home" / "containers" / "packages").glob("*/hwtestpkg"))
        assert len(built) == 1
        again = headwater.run(python_in_image, containers="always", enable_cache=False)
        assert again.state == "SUCCEEDED", again.error
    tasks = {t.name: t for t in run.tasks}
    assert tasks["where-am-i"].outputs["Output"] == "/usr/bin/python3 kit=True"
    assert tasks["where-am-i"].container == {
        "runtime": PODMAN,
        "image": python_image,
        "digest": image_id(python_image),
    }


def test_artifacts_cross_the_container_on_an_s3_pipeline_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_bucket: str, busybox_image: str
) -> None:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    run = headwater.run(
        in_images.in_images, pipeline_root=f"s3://{s3_bucket}/root", containers="auto"
    )
    assert run.state == "SUCCEEDED", run.error
    assert run.outputs == {"Output": EXPECTED}
    copy = next(a for t in run.tasks if t.name == "from-image" for a in [t])
    assert copy.container is not None and copy.container["image"] == busybox_image


def test_a_dask_worker_runs_the_container_on_its_machine(
    headwater: Cli, dask_cluster: DaskCluster, busybox_image: str
) -> None:
    result = run_ok(
        headwater.run(
            "in_images",
            "--pipeline",
            "in-images",
            "--containers",
            "auto",
            "--executor",
            "dask",
            "--scheduler",
            dask_cluster.address,
            "--shared-fs",
        )
    )
    assert result["outputs"] == {"Output": EXPECTED}, dask_cluster.logs()
    task = next(t for t in headwater.show(result["run_id"])["tasks"] if t["name"] == "from-image")
    # Resolved on the worker, which ran it: the image id there is recorded.
    assert task["executor"] == "dask"
    assert task["container"]["digest"] == image_id(busybox_image)


def _wait_for(label: str, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while not (found := containers_with(label)):
        assert time.monotonic() < deadline, f"no container with {label}"
        time.sleep(0.2)
    return found


def test_kfp_client_runs_and_terminates_container_tasks_on_the_server(
    tmp_path: Path, busybox_image: str
) -> None:
    home = tmp_path / "home"
    with running_server(home, "--containers", "auto") as base:
        client = kfp_client(base)
        made = client.create_run_from_pipeline_func(in_images.in_images, arguments={})
        run = wait_state(client, made.run_id, ("SUCCEEDED", "FAILED"), timeout=120)
        assert run.state == "SUCCEEDED", run.error
        details: Any = get_run(made.run_id, metadata=f"sqlite:///{home / 'metadata.db'}")
        task = next(t for t in details.tasks if t.name == "from-image")
        assert task.container["digest"] == image_id(busybox_image)

        sleeping = client.create_run_from_pipeline_func(in_images.sleeps_in_image, arguments={})
        label = f"io.headwater.run={sleeping.run_id}"
        _wait_for(label)
        client.terminate_run(sleeping.run_id)
        wait_state(client, sleeping.run_id, ("CANCELED", "FAILED"), timeout=60)
        deadline = time.monotonic() + 30
        while containers_with(label):
            assert time.monotonic() < deadline, "a terminated run's container is still there"
            time.sleep(0.2)
