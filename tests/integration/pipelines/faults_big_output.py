"""A task returning a long list, so that the run's `run.json` is its largest file."""

from kfp import dsl


@dsl.component
def numbers(n: int) -> list:
    return list(range(n))


@dsl.pipeline
def faults_big_output(n: int = 50000) -> list:
    return numbers(n=n).output
