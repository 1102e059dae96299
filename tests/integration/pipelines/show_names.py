"""Names as `runs show` prints them: a pipeline parameter used by `set_cpu_limit` (KFP adds it
to the task as `pipelinechannel--cpus`) and artifacts whose paths differ only near their end."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make(text: str, data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write(text)


@dsl.component
def use(data: Input[Dataset], label: str) -> str:
    with open(data.path) as f:
        return label + f.read()


@dsl.pipeline
def show_names(cpus: str = "1", label: str = "x"):
    make(text="a")
    made = make(text="b")
    use(data=made.outputs["data"], label=label).set_cpu_limit(cpus)
