"""kubernetes.set_timeout: a task that outlives its deadline is stopped and fails."""

from kfp import dsl, kubernetes


@dsl.component
def nap(seconds: int) -> str:
    import time

    time.sleep(seconds)
    return "woke"


@dsl.pipeline
def k8s_timeout(seconds: int = 600) -> str:
    task = nap(seconds=seconds)
    kubernetes.set_timeout(task, 1)
    return task.output
