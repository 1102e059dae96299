"""A quick task, then one that writes its pid and sleeps 60 s unless `<scratch>/marker` exists.

For killing the engine mid-run; each task appends a line to `<scratch>/calls-<task>.txt`.
"""

from kfp import dsl


@dsl.component
def quick(scratch: str) -> str:
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "calls-quick.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    return "quick"


@dsl.component
def nap(scratch: str, previous: str) -> str:
    import os
    import time

    with open(os.path.join(scratch, "calls-nap.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    if not os.path.exists(os.path.join(scratch, "marker")):
        tmp = os.path.join(scratch, "pid.tmp")
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, os.path.join(scratch, "pid"))
        time.sleep(60)
    return previous + "+nap"


@dsl.pipeline
def storage_nap(scratch: str) -> str:
    first = quick(scratch=scratch)
    return nap(scratch=scratch, previous=first.output).output
