"""A task that records its pid and then sleeps long: for interrupting a run.

With `ignore_sigterm` the task ignores SIGTERM, as a task with its own graceful-shutdown
handler effectively does, so only a SIGKILL stops it.
"""

from kfp import dsl


@dsl.component
def sleeper(scratch: str, seconds: float, ignore_sigterm: bool) -> str:
    import os
    import signal
    import time

    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.makedirs(scratch, exist_ok=True)
    tmp = os.path.join(scratch, "pid.tmp")
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, os.path.join(scratch, "pid"))
    print("sleeper-started", flush=True)
    time.sleep(seconds)
    return "woke"


@dsl.pipeline
def runtime_sleeper(scratch: str, seconds: float = 30.0, ignore_sigterm: bool = False) -> str:
    task = sleeper(scratch=scratch, seconds=seconds, ignore_sigterm=ignore_sigterm)
    return task.set_caching_options(False).output
