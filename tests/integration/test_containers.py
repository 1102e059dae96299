"""Container components run in their images, by a real Podman, with images built here.

`HEADWATER_CONTAINERS` is `never` for the rest of the suite (tests/conftest.py); these tests
choose their mode with `--containers`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_harness import Cli, one_line, run_failed, run_ok
from container_images import (
    BUSYBOX,
    IMAGE_TEXT,
    PODMAN,
    containers_with,
    image_id,
    needs_podman,
)

pytestmark = [pytest.mark.integration, needs_podman]

_OWNER = "io.headwater.owner"
#: The default everywhere but in the rest of this suite.
AUTO = ("--containers", "auto")


def test_the_pipelines_name_the_image_the_tests_build() -> None:
    sys.path.insert(0, str(Path(__file__).parent / "pipelines"))
    try:
        import in_images
    finally:
        sys.path.pop(0)
    assert in_images.BUSYBOX == BUSYBOX


def test_a_container_component_runs_in_its_image_with_artifacts_both_ways(
    headwater: Cli, busybox_image: str
) -> None:
    result = run_ok(headwater.run("in_images", "--pipeline", "in-images", *AUTO))
    expected = f"{IMAGE_TEXT.strip()} | from the host + in the image"
    assert result["outputs"] == {"Output": expected}
    shown = headwater.show(result["run_id"])
    tasks = {t["name"]: t for t in shown["tasks"]}
    # Recorded per task: the runtime and the exact image; the host tasks ran on the host.
    assert tasks["from-image"]["container"] == {
        "runtime": PODMAN,
        "image": busybox_image,
        "digest": image_id(busybox_image),
    }
    assert tasks["write-on-host"]["container"] is None
    log = Path(tasks["from-image"]["log_path"]).read_text()
    assert "greeting=hi home=/nowhere" in log  # its env, as the component set it
    record = json.loads((headwater.home / "runs" / result["run_id"] / "run.json").read_text())
    assert record["containers"] == "auto"
    # Nothing of the run is left running, and what it wrote is the user's to delete.
    assert containers_with(f"io.headwater.run={result['run_id']}") == []
    copy = next((headwater.home / "artifacts").rglob("from-image/copy"))
    assert copy.stat().st_uid == os.getuid()

    again = run_ok(headwater.run("in_images", "--pipeline", "in-images", *AUTO))
    assert {t["name"]: t["cached"] for t in again["tasks"]}["from-image"] is True

    # `never` is today's host path, named in the run's record, and not served the image's
    # cached result: the host has no /etc/headwater-image.txt.
    never = headwater.run("in_images", "--pipeline", "in-images", "--containers", "never")
    failed = run_failed(never)
    (task,) = [t for t in failed["tasks"] if t["name"] == "from-image"]
    assert task["state"] == "FAILED" and task["container"] is None
    record = json.loads((headwater.home / "runs" / failed["run_id"] / "run.json").read_text())
    assert record["containers"] == "never"


def test_a_missing_image_fails_its_task_in_one_line_within_seconds(headwater: Cli) -> None:
    began = time.monotonic()
    failed = run_failed(headwater.run("in_images", "--pipeline", "absent-image", *AUTO))
    assert time.monotonic() - began < 60
    (task,) = failed["tasks"]
    message = task["error"]["message"]
    assert "localhost/headwater-test/absent:1" in message and "podman" in message, message
    assert "\n" not in message and task["error"]["error_type"] == "ContainerError"


def test_no_runtime_refuses_the_run_before_it_starts(headwater: Cli, tmp_path: Path) -> None:
    named = headwater._replace(env={**headwater.env, "HEADWATER_CONTAINER_RUNTIME": "nerdctl"})
    line = one_line(named.run("in_images", "--pipeline", "in-images", *AUTO))
    assert "'nerdctl'" in line and "HEADWATER_CONTAINER_RUNTIME" in line, line
    empty = tmp_path / "bin"
    empty.mkdir()
    bare = headwater._replace(env={**headwater.env, "PATH": str(empty)})
    line = one_line(bare.run("in_images", "--pipeline", "in-images", *AUTO))
    assert "'from-image'" in line and BUSYBOX in line and "--containers never" in line, line
    assert not (headwater.home / "runs").exists() or not any((headwater.home / "runs").iterdir())


def _wait_for_container(label: str, timeout: float = 60, runtime: str | None = None) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = containers_with(label, runtime)
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no container with {label} after {timeout} s")


def _wait_gone(label: str, timeout: float = 30, runtime: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while containers_with(label, runtime):
        assert time.monotonic() < deadline, f"containers with {label} outlived their task"
        time.sleep(0.2)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_no_container_outlives_an_interrupted_or_killed_engine(
    headwater: Cli, busybox_image: str, how: signal.Signals
) -> None:
    _interrupt_a_sleeping_run(headwater, how, None)


def _interrupt_a_sleeping_run(headwater: Cli, how: signal.Signals, runtime: str | None) -> None:
    proc = headwater.popen(
        "run", str(Path(__file__).parent / "pipelines" / "in_images.py"),
        "--pipeline", "sleeps-in-image", "--containers", "auto",
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        (container,) = _wait_for_container(_OWNER + "=" + _owner_of(proc.pid), runtime=runtime)
        proc.send_signal(how)
        proc.wait(timeout=60)
        _wait_gone(f"{_OWNER}={_owner_of(proc.pid, fallback=True)}", runtime=runtime)
        assert container not in containers_with(_OWNER, runtime)
    finally:
        proc.kill()
        proc.wait()


def test_docker_runs_the_same_pipelines_and_leaves_no_container(
    headwater: Cli, docker_busybox: str, busybox_image: str
) -> None:
    docker = headwater._replace(env={**headwater.env, "HEADWATER_CONTAINER_RUNTIME": "docker"})
    result = run_ok(docker.run("in_images", "--pipeline", "in-images", *AUTO))
    assert result["outputs"] == {"Output": f"{IMAGE_TEXT.strip()} | from the host + in the image"}
    task = next(t for t in docker.show(result["run_id"])["tasks"] if t["name"] == "from-image")
    assert task["container"]["runtime"] == docker_busybox
    assert task["container"]["digest"] == image_id(busybox_image, docker_busybox)
    # Docker's daemon, not this process tree, holds the container: the labels find it.
    _interrupt_a_sleeping_run(docker, signal.SIGKILL, docker_busybox)


_owners: dict[int, str] = {}


def _owner_of(engine: int, *, fallback: bool = False) -> str:
    """The owner label of the engine's fork server (its only child running Python)."""
    if fallback:
        return _owners[engine]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in _children(engine):
            with open(f"/proc/{child}/cmdline", "rb") as fh:
                if b"headwater.executors.forkserver" in fh.read():
                    from headwater.executors.containers import owner

                    _owners[engine] = owner(child)
                    return _owners[engine]
        time.sleep(0.05)
    raise AssertionError("the engine started no fork server")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def test_secrets_volumes_limits_and_pull_policy_reach_the_container(
    headwater: Cli, busybox_image: str
) -> None:
    password = "s3cr3t-value-for-the-container"
    stored = subprocess.run(
        headwater.argv("secrets", "set", "db", "password"),
        input=password, capture_output=True, text=True, env=headwater.env, cwd=headwater.cwd,
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    result = run_ok(headwater.run("in_images", "--pipeline", "platform-in-image", *AUTO))
    # --memory, from its limit (the kernel rounds it down to whole pages).
    assert 0 <= 100_000_000 - int(result["outputs"]["Output"].strip()) < 4096
    (task,) = headwater.show(result["run_id"])["tasks"]
    log = Path(task["log_path"]).read_text()
    # The secret reached the container as a variable and as a file, and is masked in the log.
    assert password not in log and log.count("password=") == 1, log
    assert "file=" in log and log.split("file=")[1].strip() == log.split("password=")[1].split()[0]
    # Its pull policy (Never) was honoured, not named as ignored.
    assert "image pull policy" not in log


def test_never_pull_policy_names_the_image_and_the_fix(headwater: Cli, tmp_path: Path) -> None:
    source = (Path(__file__).parent / "pipelines" / "in_images.py").read_text()
    source = source.replace('"localhost/headwater-test/absent:1", command=["true"])',
                            '"localhost/headwater-test/absent:1", command=["true"])\n\n\n'
                            "from kfp import kubernetes as _k8s  # noqa: E402")  # fmt: skip
    source += (
        "\n\n@dsl.pipeline(name='absent-never')\ndef absent_never() -> None:\n"
        "    _k8s.set_image_pull_policy(absent(), 'Never')\n"
    )
    path = tmp_path / "never.py"
    path.write_text(source)
    failed = run_failed(headwater("run", str(path), "--pipeline", "absent-never", "--json", *AUTO))
    (task,) = failed["tasks"]
    message = task["error"]["message"]
    assert "is not present for podman and its pull policy is Never" in message, message


def test_a_kubernetes_timeout_stops_and_removes_the_container(
    headwater: Cli, busybox_image: str
) -> None:
    began = time.monotonic()
    failed = run_failed(headwater.run("in_images", "--pipeline", "times-out-in-image", *AUTO))
    assert time.monotonic() - began < 60
    (task,) = failed["tasks"]
    assert task["state"] == "FAILED" and "SIGALRM" in task["error"]["message"], task["error"]
    assert containers_with(f"io.headwater.run={failed['run_id']}") == []


def test_a_sweep_removes_containers_whose_owner_is_gone(headwater: Cli, busybox_image: str) -> None:
    # What a SIGKILLed executor of this machine left: a container whose owner process is gone.
    dead = f"{os.uname().nodename}/999999999/1"
    left = subprocess.run(
        [str(PODMAN), "run", "-d", "--label", f"{_OWNER}={dead}", busybox_image, "sleep", "600"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # Another machine's container is its own sweep's to judge: left alone.
    other = subprocess.run(
        [str(PODMAN), "run", "-d", "--label", f"{_OWNER}=elsewhere/1/1", busybox_image,
         "sleep", "600"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        run_ok(headwater.run("in_images", "--pipeline", "in-images", *AUTO))
        _wait_gone(f"{_OWNER}={dead}")
        assert [c for c in containers_with(f"{_OWNER}=elsewhere/1/1") if other.startswith(c)]
    finally:
        # One at a time: `rm` of several stops at the first that is gone (the swept one).
        for container in (left, other):
            subprocess.run([str(PODMAN), "rm", "-f", "-t", "0", container], capture_output=True)


def test_a_rebuilt_image_is_a_cache_miss(
    headwater: Cli, tmp_path: Path, busybox_image: str
) -> None:
    name = f"localhost/headwater-test/rebuilt-{os.getpid()}:1"
    source = (Path(__file__).parent / "pipelines" / "in_images.py").read_text()
    path = tmp_path / "rebuilt.py"
    path.write_text(source.replace('BUSYBOX = "localhost/headwater-test/busybox:2"',
                                   f"BUSYBOX = {name!r}"))  # fmt: skip
    args = ("run", str(path), "--pipeline", "in-images", "--json", *AUTO)
    subprocess.run([str(PODMAN), "tag", busybox_image, name], check=True)
    try:
        first = run_ok(headwater(*args))
        again = run_ok(headwater(*args))
        assert {t["name"]: t["cached"] for t in again["tasks"]}["from-image"] is True
        # The same name, another image (its id differs): the task runs again, in that one.
        rebuilt = subprocess.run(
            [str(PODMAN), "build", "-q", "-t", name, "-f", "-", str(tmp_path)],
            input=f"FROM {busybox_image}\nRUN echo rebuilt > /etc/rebuilt\n",
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert rebuilt.returncode == 0
        third = run_ok(headwater(*args))
        task = next(t for t in third["tasks"] if t["name"] == "from-image")
        assert task["cached"] is False and task["container"]["digest"] == image_id(name)
        assert (
            task["container"]["digest"]
            != next(t for t in first["tasks"] if t["name"] == "from-image")["container"]["digest"]
        )
    finally:
        subprocess.run([str(PODMAN), "rmi", "-f", name], capture_output=True)


def test_an_absent_image_is_pulled_by_its_task_and_the_id_it_got_recorded(
    headwater: Cli, tmp_path: Path, busybox_image: str
) -> None:
    # No registry is reachable: the image comes from an OCI archive, which Podman pulls.
    archive = tmp_path / "busybox.tar"
    subprocess.run(
        [str(PODMAN), "save", "--format", "oci-archive", "-o", str(archive), busybox_image],
        check=True, capture_output=True,
    )  # fmt: skip
    source = (Path(__file__).parent / "pipelines" / "in_images.py").read_text()
    path = tmp_path / "archived.py"
    path.write_text(source.replace('BUSYBOX = "localhost/headwater-test/busybox:2"',
                                   f'BUSYBOX = "oci-archive:{archive}"'))  # fmt: skip
    args = ("run", str(path), "--pipeline", "in-images", "--json", *AUTO)
    first = run_ok(headwater(*args))
    task = next(t for t in first["tasks"] if t["name"] == "from-image")
    assert task["container"]["digest"] == image_id(busybox_image)
    assert first["outputs"] == {"Output": f"{IMAGE_TEXT.strip()} | from the host + in the image"}
    # Pulled, not resolved before: there was no id to key the cache on, so it runs again.
    again = run_ok(headwater(*args))
    assert {t["name"]: t["cached"] for t in again["tasks"]}["from-image"] is False
