"""A task that shows its secret every way a task's output can: the tests check each is masked.

It prints the value, writes it in two halves (flushed apart), has a child process echo it, and
fails with an error that quotes it.
"""

from kfp import dsl, kubernetes


@dsl.component
def leak() -> str:
    import os
    import subprocess
    import sys
    import time

    value = os.environ["DB_PASSWORD"]
    print(f"printed: {value}", flush=True)
    half = len(value) // 2
    sys.stdout.write(f"split: {value[:half]}")
    sys.stdout.flush()
    time.sleep(0.05)  # so the two halves reach the log's reader apart
    sys.stdout.write(f"{value[half:]}\n")
    sys.stdout.flush()
    subprocess.run(["sh", "-c", 'echo "child: $DB_PASSWORD" >&2'], check=True)
    raise RuntimeError(f"cannot connect with password {value!r}")


@dsl.pipeline
def k8s_secret_leak() -> str:
    task = leak()
    kubernetes.use_secret_as_env(task, "db", {"password": "DB_PASSWORD"})
    return task.output
