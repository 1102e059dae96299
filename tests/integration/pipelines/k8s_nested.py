"""A secret named by a pipeline parameter, used inside a ParallelFor and a nested pipeline."""

from kfp import dsl, kubernetes


@dsl.component
def password_length(x: int) -> str:
    import os

    return f"{x}:{len(os.environ['PW'])}"


@dsl.pipeline
def inner(secret: str) -> str:
    task = password_length(x=0)
    kubernetes.use_secret_as_env(task, secret, {"password": "PW"})
    return task.output


@dsl.pipeline
def k8s_nested(secret: str = "db") -> list:
    with dsl.ParallelFor([1, 2]) as item:
        task = password_length(x=item)
        kubernetes.use_secret_as_env(task, secret, {"password": "PW"})
    inner(secret=secret)
    return dsl.Collected(task.output)
