"""A task that leaves processes behind in every shape; the task after it checks they are gone.

`leave_behind` starts, and records the pid of, each of: a background child (in the task's
process group), an orphan that stays in the group (a shell's `&` job whose shell exited), a
double-forked daemon that left the group with `setsid`, and a child started in its own
session. It returns at once, or with `linger` sleeps so that the run can be interrupted.
`check_gone` fails unless every recorded process has ended by the time it runs.
"""

from kfp import dsl

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(300)
    os._exit(0)
os._exit(0)
"""


@dsl.component
def leave_behind(scratch: str, linger: bool, daemon: str) -> str:
    import os
    import subprocess
    import sys
    import time

    os.makedirs(scratch, exist_ok=True)

    def record(name: str, pid: int) -> None:
        with open(os.path.join(scratch, name + ".tmp"), "w") as f:
            f.write(str(pid))
        os.replace(os.path.join(scratch, name + ".tmp"), os.path.join(scratch, name))

    record("background.pid", subprocess.Popen(["sleep", "300"]).pid)
    record("session.pid", subprocess.Popen(["sleep", "301"], start_new_session=True).pid)
    orphan = os.path.join(scratch, "orphan.pid")
    subprocess.run(["sh", "-c", f"sleep 302 & echo $! > {orphan}.tmp; mv {orphan}.tmp {orphan}"])
    subprocess.run([sys.executable, "-c", daemon, os.path.join(scratch, "daemon.pid")])
    names = ("background.pid", "session.pid", "orphan.pid", "daemon.pid")
    deadline = time.monotonic() + 30
    while not all(os.path.exists(os.path.join(scratch, n)) for n in names):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every process recorded its pid: {os.listdir(scratch)}")
        time.sleep(0.01)
    with open(os.path.join(scratch, "ready"), "w") as f:
        f.write(str(os.getpid()))
    if linger:
        time.sleep(300)
    return scratch


@dsl.component
def check_gone(scratch: str) -> str:
    import os
    import time

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False

    pids = {}
    for name in sorted(os.listdir(scratch)):
        if name.endswith(".pid"):
            with open(os.path.join(scratch, name)) as f:
                pids[name] = int(f.read())
    deadline = time.monotonic() + 20
    while [n for n, p in pids.items() if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [n for n, p in pids.items() if alive(p)]
    if left:
        raise RuntimeError(f"still running after their task ended: {left}")
    return "all-gone"


@dsl.pipeline
def task_leftovers(scratch: str, linger: bool = False) -> str:
    first = leave_behind(scratch=scratch, linger=linger, daemon=DAEMON).set_caching_options(False)
    return check_gone(scratch=first.output).set_caching_options(False).output
