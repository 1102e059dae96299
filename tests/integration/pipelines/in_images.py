"""Container components whose images the tests build here (`container_images.py`).

`from_image` reads a file only its image has and an artifact a host task wrote, and writes an
artifact and a parameter the host reads back. No `from __future__ import annotations`: kfp
reads the annotations as types.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output, OutputPath

BUSYBOX = "localhost/headwater-test/busybox:2"


@dsl.component(base_image="python:3.11")
def write_on_host(data: Output[Dataset]):
    with open(data.path, "w") as fh:
        fh.write("from the host")


@dsl.container_component
def from_image(source: Input[Dataset], note: OutputPath(str), copy: Output[Dataset]):
    return dsl.ContainerSpec(
        image=BUSYBOX,
        command=[
            "sh",
            "-c",
            'set -e; cat /etc/headwater-image.txt > "$1"; '
            '{ cat "$0"; echo " + in the image"; } > "$2"; '
            'echo "uid=$(id -u) greeting=$GREETING home=$HOME"',
        ],
        args=[source.path, note, copy.path],
    )


@dsl.component(base_image="python:3.11")
def read_on_host(note: str, copy: Input[Dataset]) -> str:
    with open(copy.path) as fh:
        return note.strip() + " | " + fh.read().strip()


@dsl.pipeline(name="in-images")
def in_images() -> str:
    written = write_on_host()
    inside = from_image(source=written.outputs["data"]).set_env_variable("GREETING", "hi")
    # Variables a runtime reads itself reach the container, and leave the runtime alone.
    inside.set_env_variable("HOME", "/nowhere").set_env_variable(
        "CONTAINER_HOST", "unix:///nowhere.sock"
    ).set_env_variable("DOCKER_HOST", "unix:///nowhere.sock")
    return read_on_host(note=inside.outputs["note"], copy=inside.outputs["copy"]).output


@dsl.container_component
def sleeper():
    return dsl.ContainerSpec(image=BUSYBOX, command=["sleep", "600"])


@dsl.pipeline(name="sleeps-in-image")
def sleeps_in_image() -> None:
    sleeper()


@dsl.container_component
def absent():
    return dsl.ContainerSpec(image="localhost/headwater-test/absent:1", command=["true"])


@dsl.pipeline(name="absent-image")
def absent_image() -> None:
    absent().set_retry(0)


@dsl.container_component
def platform_probe(seen: OutputPath(str)):
    return dsl.ContainerSpec(
        image=BUSYBOX,
        command=[
            "sh",
            "-c",
            'set -e; echo "password=$DB_PASSWORD file=$(cat /mnt/db/password)"; '
            "{ cat /sys/fs/cgroup/memory.max 2>/dev/null || "
            'cat /sys/fs/cgroup/memory/memory.limit_in_bytes; } > "$0"',
        ],
        args=[seen],
    )


@dsl.pipeline(name="platform-in-image")
def platform_in_image() -> str:
    from kfp import kubernetes

    probe = platform_probe().set_memory_limit("100M").set_cpu_limit("500m")
    kubernetes.use_secret_as_env(probe, "db", {"password": "DB_PASSWORD"})
    kubernetes.use_secret_as_volume(probe, "db", mount_path="/mnt/db")
    kubernetes.set_image_pull_policy(probe, "Never")
    return probe.outputs["seen"]


@dsl.pipeline(name="times-out-in-image")
def times_out_in_image() -> None:
    from kfp import kubernetes

    kubernetes.set_timeout(sleeper().set_retry(0), 2)
