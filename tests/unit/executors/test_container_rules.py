"""The container rules that need no runtime: which tasks run in images, the runtime's command
line, pull policies and settings. (Running them: tests/integration/test_containers*.py.)"""

from __future__ import annotations

import os

import pytest

from headwater import config
from headwater.engine.options import RunOptions
from headwater.errors import ConfigError, ContainerError, UserError
from headwater.executors.containers import ContainerPolicy, is_python, kind, owned, pull_policy
from headwater.executors.in_image import _hosts, run_argv

PYTHON = {
    "image": "python:3.11",
    "command": ["sh", "-c", "python3 -m kfp.dsl.executor_main ... ephemeral_component.py", "sh"],
    "args": ["--executor_input", "{{$}}"],
}
COMMAND = {"image": "alpine", "command": ["sh", "-c", "echo hi"]}
OPERATION = {"image": "argostub/createpvc"}


def spec(**more: object) -> dict[str, object]:
    return {
        "name": "headwater-run-1-1-abc",
        "labels": {"io.headwater.run": "r"},
        "args": ["--network=host"],
        "argv": ["sh", "-c", "echo $SECRET"],
        **more,
    }


def test_which_tasks_run_in_their_images_by_mode() -> None:
    auto, always, never = (ContainerPolicy(m, "/usr/bin/podman") for m in config.CONTAINER_MODES)
    assert is_python(PYTHON) and not is_python(COMMAND)
    assert [auto.wants_image(c) for c in (COMMAND, PYTHON, OPERATION)] == [True, False, False]
    assert [always.wants_image(c) for c in (COMMAND, PYTHON, OPERATION)] == [True, True, False]
    assert [never.wants_image(c) for c in (COMMAND, PYTHON)] == [False, False]


def test_a_run_that_needs_a_runtime_it_lacks_is_refused_naming_the_component() -> None:
    executors = {"exec-train": {"container": COMMAND}, "exec-py": {"container": PYTHON}}
    with pytest.raises(ContainerError, match="'train' runs in its image 'alpine'"):
        ContainerPolicy("auto", None).check(executors)
    ContainerPolicy("auto", None, here=False).check(executors)  # Dask: the workers decide
    ContainerPolicy("auto", None).check({"exec-py": {"container": PYTHON}})
    with pytest.raises(ContainerError, match=r"'py' runs in its image 'python:3\.11'"):
        ContainerPolicy("always", None).check({"exec-py": {"container": PYTHON}})


def test_the_runtime_command_line_for_podman_and_docker() -> None:
    mounts = [["/data/in", "/data/in", True], ["", "/scratch", False], ["/w", "/w", False]]
    env = {"SECRET": "hunter2-value", "CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/home/task"}
    podman = run_argv(
        "/usr/bin/podman", "sha256:abc",
        spec(cpu_limit=0.5, memory_limit=1e8, gpus=["2", "3"]), mounts, env,
    )  # fmt: skip
    joined = " ".join(podman)
    assert podman[:5] == ["/usr/bin/podman", "run", "--rm", "--name", "headwater-run-1-1-abc"]
    assert "--cpus 0.5 --memory 100000000" in joined
    assert "--device nvidia.com/gpu=2 --device nvidia.com/gpu=3" in joined
    assert "--mount type=bind,source=/data/in,target=/data/in,ro" in joined
    assert "--mount type=bind,source=/w,target=/w " in joined and "--tmpfs /scratch" in joined
    assert "--label io.headwater.run=r" in joined
    # Variables go by name: no value is on a command line (/proc/PID/cmdline is world-readable),
    # but for those the runtime reads itself, which keep the runtime's own values.
    assert "-e SECRET" in joined and "hunter2" not in joined
    assert "-e HOME=/home/task" in joined
    # The user's own arguments, then the image, then the command exactly as resolved.
    assert podman[-5:] == ["--network=host", "sha256:abc", "sh", "-c", "echo $SECRET"]
    docker = run_argv("/usr/bin/docker", "img", spec(gpus=["1", "2"]), [], {})
    # Quoted: Docker reads the value as CSV and would take a bare "2" for a count.
    assert docker[docker.index("--gpus") : docker.index("--gpus") + 2] == ["--gpus", '"device=1,2"']
    assert "--device" not in docker
    with pytest.raises(ContainerError, match="comma"):
        run_argv("/usr/bin/podman", "img", spec(), [["/a,b", "/a,b", False]], {})


def test_docker_runs_as_the_user_who_is_not_root() -> None:
    base = spec(argv=["true"])
    docker = " ".join(run_argv("docker", "i", base, [], {}, user=(1000, 100)))
    assert "--user 1000:100" in docker
    assert "--user" not in run_argv("docker", "i", base, [], {}, user=(0, 0))
    # Rootless Podman maps the container's root to the user already.
    assert "--user" not in run_argv("podman", "i", base, [], {}, user=(1000, 100))


def test_pull_policies_and_runtime_names() -> None:
    assert pull_policy(None) == "IfNotPresent"
    assert pull_policy({"imagePullPolicy": "Never"}) == "Never"
    with pytest.raises(ContainerError, match="'Sometimes' is not one of"):
        pull_policy({"imagePullPolicy": "Sometimes"})
    assert kind("/usr/local/bin/docker") == "docker" and kind("podman-remote") == "podman"
    # Another machine's containers are its own sweep's to judge; a dead local owner's are not.
    assert owned("elsewhere.example/1/1")
    assert not owned(f"{os.uname().nodename}/999999999/1")


def test_settings_are_checked_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.CONTAINERS_ENV, "sometimes")
    with pytest.raises(ConfigError, match="HEADWATER_CONTAINERS='sometimes' is not one of"):
        config.containers()
    monkeypatch.setenv(config.CONTAINERS_ENV, "Always")
    assert config.containers() == "always"
    monkeypatch.setenv(config.CONTAINER_ARGS_ENV, "--network=host --label 'a=b c'")
    assert config.container_args() == ("--network=host", "--label", "a=b c")
    monkeypatch.setenv(config.CONTAINER_ARGS_ENV, "--label 'open")
    with pytest.raises(ConfigError, match="HEADWATER_CONTAINER_ARGS"):
        config.container_args()
    with pytest.raises(UserError, match="containers='sometimes' is not one of"):
        RunOptions.build(containers="sometimes")
    monkeypatch.setenv(config.CONTAINER_RUNTIME_ENV, "no-such-runtime")
    with pytest.raises(ContainerError, match="'no-such-runtime'"):
        ContainerPolicy.build("auto", here=True)
    assert ContainerPolicy.build("never", here=True).runtime is None  # never looks for none


def test_trusted_hosts_become_hosts_for_the_image_pip() -> None:
    url = "http://127.0.0.1:8080/simple"
    assert _hosts(["--index-url", url, "--trusted-host", url]) == [
        "--index-url", url, "--trusted-host", "127.0.0.1:8080",
    ]  # fmt: skip
