"""An exit handler that is itself a pipeline, guarding a task that fails when told to."""

from kfp import dsl


@dsl.component
def work(fail: bool) -> str:
    if fail:
        raise RuntimeError("work failed")
    return "worked"


@dsl.component
def say(message: str) -> str:
    return message


@dsl.pipeline
def notify(message: str = "notified") -> str:
    first = say(message=message)
    return say(message=first.output).output


@dsl.pipeline
def faults_exit_pipeline(fail: bool = True):
    with dsl.ExitHandler(notify()):
        work(fail=fail)
