"""A task whose output directory holds a file, a symlink to it and a FIFO (which no one
ever opens for writing): recording the artifact must not block on the FIFO."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make_pipes(data: Output[Dataset]):
    import os

    os.makedirs(data.path)
    with open(os.path.join(data.path, "rows.txt"), "w") as f:
        f.write("a\nb\n")
    os.symlink("rows.txt", os.path.join(data.path, "same-rows.txt"))
    os.mkfifo(os.path.join(data.path, "pipe"))


@dsl.component
def count_rows(data: Input[Dataset]) -> int:
    import os

    with open(os.path.join(data.path, "rows.txt")) as f:
        return len(f.read().splitlines())


@dsl.pipeline
def storage_fifo() -> int:
    return count_rows(data=make_pipes().outputs["data"]).output
