"""A task that prints a line and then raises: its error and its log tail must be reported."""

from kfp import dsl


@dsl.component
def explode(message: str) -> str:
    print("explode-log-line: about to raise 5d1c")
    raise RuntimeError(message)


@dsl.pipeline
def runtime_failure(message: str = "detonated-9b2e") -> str:
    return explode(message=message).output
