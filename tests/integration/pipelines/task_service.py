"""A task that starts a service meant to outlive it (HEADWATER_SERVICE set, its own session)
and, beside it, the same process without the mark; it records both pids in `scratch`."""

from kfp import dsl


@dsl.component
def start_service(scratch: str) -> str:
    import os
    import subprocess

    os.makedirs(scratch, exist_ok=True)
    marked = {**os.environ, "HEADWATER_SERVICE": "test:sleeper"}
    service = subprocess.Popen(["sleep", "310"], start_new_session=True, env=marked)
    plain = subprocess.Popen(["sleep", "311"], start_new_session=True)
    for name, pid in (("service.pid", service.pid), ("plain.pid", plain.pid)):
        with open(os.path.join(scratch, name), "w") as f:
            f.write(str(pid))
    return scratch


@dsl.pipeline
def task_service(scratch: str) -> str:
    return start_service(scratch=scratch).set_caching_options(False).output
