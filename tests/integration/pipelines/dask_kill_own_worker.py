"""A task whose first attempt kills the Dask worker running it (its fork server's parent)."""

from kfp import dsl


@dsl.component
def fragile(marker: str) -> str:
    import os
    import signal

    if not os.path.exists(marker):
        open(marker, "w").close()
        with open(f"/proc/{os.getppid()}/stat") as fh:  # the fork server; its parent: the worker
            worker = int(fh.read().rpartition(")")[2].split()[1])
        os.kill(worker, signal.SIGKILL)
        signal.pause()
    return "second attempt"


@dsl.pipeline
def kill_own_worker(marker: str) -> str:
    return fragile(marker=marker).set_retry(num_retries=1).set_caching_options(False).output
