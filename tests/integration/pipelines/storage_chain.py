"""Four chained tasks, each appending a line to `<scratch>/calls-<label>.txt` when it runs.

The third fails until `<scratch>/marker` exists: for `headwater run --resume`. `step-2` has
caching off, so a resume must reuse it from the run itself, not from the cache.
"""

from kfp import dsl


@dsl.component
def step(scratch: str, label: str, previous: str, needs_marker: bool) -> str:
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, f"calls-{label}.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    if needs_marker and not os.path.exists(os.path.join(scratch, "marker")):
        raise RuntimeError(f"step {label} needs {scratch}/marker")
    return previous + label


@dsl.pipeline
def storage_chain(scratch: str) -> str:
    first = step(scratch=scratch, label="a", previous="", needs_marker=False)
    second = step(scratch=scratch, label="b", previous=first.output, needs_marker=False)
    second.set_caching_options(False)
    third = step(scratch=scratch, label="c", previous=second.output, needs_marker=True)
    fourth = step(scratch=scratch, label="d", previous=third.output, needs_marker=False)
    return fourth.output
