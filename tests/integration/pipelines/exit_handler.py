"""dsl.ExitHandler with an exit task that reads dsl.PipelineTaskFinalStatus, and a cleanup task
that runs after a failure thanks to ignore_upstream_failure().

`fail=True` makes the body fail. The exit task records the final status it received in
`scratch/exit_status.json` (exit-task outputs cannot be pipeline outputs), and the cleanup task
writes `scratch/cleanup.txt`.
"""

from kfp import dsl


@dsl.component
def work(fail: bool) -> str:
    print("work: starting")
    if fail:
        raise RuntimeError("work failed on purpose")
    return "worked"


@dsl.component
def after_work(result: str) -> str:
    return result + "-after"


@dsl.component
def report_status(scratch: str, status: dsl.PipelineTaskFinalStatus) -> str:
    import json
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "exit_status.json"), "w") as f:
        json.dump(
            {
                "state": status.state,
                "error_code": status.error_code,
                "error_message": status.error_message,
            },
            f,
        )
    print(f"final status: {status.state}")
    return status.state


@dsl.component
def cleanup(scratch: str) -> str:
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "cleanup.txt"), "w") as f:
        f.write("cleaned")
    return "cleaned"


@dsl.pipeline
def exit_handler(scratch: str, fail: bool = False):
    exit_task = report_status(scratch=scratch)
    with dsl.ExitHandler(exit_task):
        worked = work(fail=fail)
        after_work(result=worked.output)
        cleanup(scratch=scratch).after(worked).ignore_upstream_failure()
