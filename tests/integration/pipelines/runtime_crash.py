"""Tasks that die hard (os._exit, SIGSEGV) next to a sibling that must still succeed."""

from kfp import dsl


@dsl.component
def exit_hard(code: int) -> str:
    import os

    print("exit-hard: leaving without cleanup")
    os._exit(code)


@dsl.component
def segfault() -> str:
    import os
    import resource
    import signal

    # No core file in the test's working directory.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    print("segfault: about to crash")
    os.kill(os.getpid(), signal.SIGSEGV)
    return "unreachable"


@dsl.component
def steady(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "steady-done"


@dsl.pipeline
def runtime_crash():
    exit_hard(code=3)
    segfault()
    steady(seconds=0.5)
