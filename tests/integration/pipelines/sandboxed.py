"""What a sandboxed task sees and may do: a report from inside, limits enforced, and a process
it leaves behind (which must not outlive it)."""

from kfp import dsl


@dsl.component
def make(data: dsl.Output[dsl.Dataset]) -> None:
    with open(data.path, "w") as f:
        f.write("input")


@dsl.component
def inside(data: dsl.Input[dsl.Dataset], home: str) -> str:
    """Who and where this task is, as JSON."""
    import json
    import os

    status = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key.startswith("Cap") or key == "NoNewPrivs":
                status[key] = value.strip()
    try:
        with open(data.path, "a") as fh:
            fh.write("changed")
        writable = True
    except OSError:
        writable = False
    seen = sorted(os.listdir(home)) if os.path.isdir(home) else None
    return json.dumps(
        {
            "uid": os.getuid(),
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "status": status,
            "env": sorted(os.environ),
            "input": open(data.path).read(),
            "input_writable": writable,
            "home": seen,
            "tmp": sorted(os.listdir("/tmp")),
        }
    )


@dsl.component
def limited() -> str:
    """Whether 400 MB more can be had, and on how many CPUs this runs."""
    import os

    try:
        block = bytearray(400 * 2**20)
        got = f"allocated {len(block)}"
    except MemoryError:
        got = "refused"
    return f"{got}|{len(os.sched_getaffinity(0))}"


@dsl.component
def leave(mark: str) -> None:
    """Start a process in a session of its own that would run for minutes."""
    import subprocess

    subprocess.Popen(["sleep", mark], start_new_session=True)


@dsl.pipeline
def sandboxed(home: str, mark: str = "313.25") -> str:
    made = make()
    limits = limited().set_memory_limit("200M").set_cpu_limit("1")
    leave(mark=mark)
    return inside(data=made.outputs["data"], home=home).after(limits).output
