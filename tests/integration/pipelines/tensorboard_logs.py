"""TensorBoard logs as output artifacts, for `headwater tensorboard`.

`train` writes event files under `lightning_logs/version_0/` of its `tensorboard` output, as
Lightning's TensorBoardLogger does, once per loop iteration; `prepare` writes a Dataset and
`checkpoint` a plain file, neither of them logs.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Output


@dsl.component
def prepare(data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write("x,y\n1,2\n")


@dsl.component
def train(seed: int, tensorboard: Output[Artifact], checkpoint: Output[Artifact]):
    import os

    import tensorboard.summary as tb

    logs = os.path.join(tensorboard.path, "lightning_logs", "version_0")
    writer = tb.Writer(tb.DirectoryOutput(logs))
    for step in range(3):
        writer.add_scalar("loss", seed / (step + 1), step=step)
    writer.close()
    tensorboard.metadata["format"] = "tensorboard-logs"
    with open(checkpoint.path, "w") as f:
        f.write("weights")


@dsl.pipeline(name="tensorboard-logs")
def tensorboard_logs(seeds: list = [1, 2]):
    prepare()
    with dsl.ParallelFor(seeds) as seed:
        train(seed=seed)
