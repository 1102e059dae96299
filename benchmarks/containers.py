#!/usr/bin/env python
"""What running a task in its container image costs over running it on the host.

Two pipelines of busybox container components (`sh -c 'echo ... > out'`), each run both ways in
the same process, alternating, with a fresh `HEADWATER_HOME` and the cache off:

* chain: 20 tasks, each waiting on the one before (the per-task latency a container adds);
* fanout: 50 independent tasks (throughput, `--max-parallel`, default twice the CPU count).

`--containers never` runs the command on the host (busybox's `sh` here too); `auto` runs it in
the image with the first runtime found (Podman here). The report gives each run's wall time,
the cost a container adds per task, and what one container costs the runtime alone: a bare
`<runtime> run --rm IMAGE true`, and `image inspect` (once per image per run).

The image (`localhost/headwater-bench/busybox:1`) is built here from `busybox-static` with
`<runtime> import` (no registry is needed). On machines where Podman runs as root only with
runc, set `CONTAINERS_CONF` as the README's Developing section says.

Usage::

    python benchmarks/containers.py [--rounds 3] [--chain 20] [--fanout 50] [--max-parallel N]
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from _common import base_machine_info, load_average, table

IMAGE = "localhost/headwater-bench/busybox:1"


def build_image(runtime: str) -> None:
    if subprocess.run([runtime, "image", "exists", IMAGE], check=False).returncode == 0:
        return
    busybox = shutil.which("busybox")
    if busybox is None:
        sys.exit("busybox is not installed (apt install busybox-static)")
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for directory in ("bin", "tmp"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in ("sh", "echo", "true", "cat"):
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
    subprocess.run([runtime, "import", "-", IMAGE], input=data.getvalue(), check=True,
                   capture_output=True)  # fmt: skip


def pipelines(chain: int, fanout: int) -> dict[str, object]:
    from kfp import dsl
    from kfp.dsl import OutputPath

    @dsl.container_component
    def step(text: str, out: OutputPath(str)):  # type: ignore[valid-type]
        return dsl.ContainerSpec(
            image=IMAGE, command=["sh", "-c", 'echo "$0." > "$1"'], args=[text, out]
        )

    @dsl.pipeline(name="container-chain")
    def chained() -> None:
        previous = step(text="start")
        for _ in range(chain - 1):
            previous = step(text=previous.outputs["out"])

    @dsl.pipeline(name="container-fanout")
    def fanned() -> None:
        for i in range(fanout):
            step(text=f"t{i}")

    return {"chain": chained, "fanout": fanned}


def timed_run(pipeline: object, mode: str, max_parallel: int | None) -> float:
    import headwater

    with tempfile.TemporaryDirectory(prefix="hw-bench-containers-") as home:
        os.environ["HEADWATER_HOME"] = home
        began = time.perf_counter()
        run = headwater.run(
            pipeline, containers=mode, enable_cache=False, max_parallel=max_parallel
        )
        took = time.perf_counter() - began
    if run.state != "SUCCEEDED":
        sys.exit(f"{mode} run failed: {run.error}")
    return took


def bare(runtime: str, rounds: int) -> dict[str, float]:
    def median(argv: list[str]) -> float:
        times = []
        for _ in range(rounds * 3):
            began = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            times.append(time.perf_counter() - began)
        return statistics.median(times)

    return {
        "run --rm true": median([runtime, "run", "--rm", IMAGE, "true"]),
        "image inspect": median([runtime, "image", "inspect", "--format", "{{.Id}}", IMAGE]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--fanout", type=int, default=50)
    parser.add_argument("--max-parallel", type=int, default=None)
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown")
    args = parser.parse_args()
    from headwater.executors.containers import find_runtime

    runtime = find_runtime()
    if runtime is None:
        sys.exit("no container runtime: install podman or docker")
    build_image(runtime)
    made = pipelines(args.chain, args.fanout)
    sizes = {"chain": args.chain, "fanout": args.fanout}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, pipeline in made.items():
            for mode in ("never", "auto"):
                took = timed_run(pipeline, mode, args.max_parallel)
                times.setdefault((name, mode), []).append(took)
                print(f"  {name} {mode}: {took:.2f} s", file=sys.stderr, flush=True)
    rows = []
    for name in made:
        host = statistics.median(times[(name, "never")])
        image = statistics.median(times[(name, "auto")])
        per_task = (image - host) / sizes[name]
        rows.append([
            f"{name}, {sizes[name]} tasks", f"{host:.2f} s", f"{image:.2f} s",
            f"{image / host:.2f}x", f"{per_task * 1000:.0f} ms",
        ])  # fmt: skip
    info = base_machine_info()
    print(f"machine: {info['nproc']} CPUs, {info['cpu']}; load {load_average()}")
    print(f"runtime: {runtime}; medians of {args.rounds} rounds, cache off\n")
    print(table(["pipeline", "host (never)", "in image (auto)", "ratio", "added per task"],
                rows, args.markdown))  # fmt: skip
    print()
    parts = bare(runtime, args.rounds)
    print(table(["one container, the runtime alone", "median"],
                [[k, f"{v * 1000:.0f} ms"] for k, v in parts.items()], args.markdown))  # fmt: skip


if __name__ == "__main__":
    main()
