"""A task under `dsl.If`; the test replaces the condition with one that fails at run time."""

from kfp import dsl


@dsl.component
def say(message: str) -> str:
    return message


@dsl.pipeline
def faults_condition(x: int = 1):
    with dsl.If(x == 1):
        say(message="taken")
