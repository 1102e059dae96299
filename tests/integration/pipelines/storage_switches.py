"""Two tasks that append a line to `<scratch>/calls-<label>.txt` per run; `off` has caching off."""

from kfp import dsl


@dsl.component
def touch(scratch: str, label: str) -> str:
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, f"calls-{label}.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    return label


@dsl.pipeline
def storage_switches(scratch: str):
    touch(scratch=scratch, label="on")
    touch(scratch=scratch, label="off").set_caching_options(False)
