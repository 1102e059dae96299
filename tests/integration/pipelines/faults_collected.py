"""`dsl.Collected` over a task inside `dsl.If` (no loop): KFP's compiler declares the pipeline
output a LIST, yet its value is the task's own number."""

from kfp import dsl


@dsl.component
def three() -> int:
    return 3


@dsl.pipeline
def faults_collected(flag: bool = True) -> list:
    with dsl.If(flag == True):  # noqa: E712 (a pipeline channel, not a bool)
        picked = three()
    return dsl.Collected(picked.output)
