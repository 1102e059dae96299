"""`headwater run --sandbox`: each task in a bubblewrap sandbox of its own, as root (tasks drop
to an unprivileged uid) and as an ordinary user (a user namespace per task): its own PID
namespace, no capability, its inputs read-only, none of `$HEADWATER_HOME` but its own, a
private /tmp, its limits enforced, and nothing it starts outliving it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, CliResult, pipeline, run_ok

pytestmark = pytest.mark.integration

AS_A_USER = ("unshare", "--user", "--map-user=1000", "--map-group=1000", "--")


def _sandboxed(headwater: Cli, mark: str, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = [*prefix, *headwater.argv("run", pipeline("sandboxed"), "--sandbox", "--json",
            "--param", f"home={headwater.home}", "--param", f"mark={mark}")]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, env=headwater.env, cwd=headwater.cwd, timeout=120
    )
    return run_ok(CliResult.of(done.returncode, done.stdout, done.stderr))


def _sleeping(mark: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                line = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if line == f"sleep\0{mark}\0".encode():
                found.append(int(entry))
    return found


@pytest.mark.parametrize("prefix", [(), AS_A_USER], ids=["root", "ordinary-user"])
def test_a_sandboxed_task_sees_and_keeps_only_what_is_its_own(
    headwater: Cli, prefix: tuple[str, ...]
) -> None:
    if prefix and not _can_be_a_user():
        pytest.skip("runs as uid 1000 in a user namespace (needs root and `unshare --user`)")
    if not prefix and os.geteuid() != 0:
        pytest.skip("the root case needs root")
    mark = f"313.{os.getpid() % 1000}{len(prefix)}"
    marker = Path("/tmp") / f"headwater-test-marker-{os.getpid()}"
    marker.write_text("the machine's /tmp")
    try:
        summary = _sandboxed(headwater, mark, prefix)
    finally:
        marker.unlink()
    report = json.loads(summary["outputs"]["Output"])
    assert report["uid"] == (1000 if prefix else 65534)
    assert report["pids"] == [1, 2]  # the holder (the namespace's init) and the task
    status = report["status"]
    assert {status[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")} == {"0" * 16}
    assert status["NoNewPrivs"] == "1"
    assert report["input"] == "input" and report["input_writable"] is False
    assert report["home"] == ["artifacts", "runs"]  # the folders of its own paths only
    # A private /tmp: what is there leads to what the sandbox shows (the test's home, or the
    # Python environment, may be under /tmp), never what else the machine's /tmp holds.
    import headwater as package

    shown = [headwater.home, Path(sys.prefix), Path(sys.base_prefix), Path(package.__file__)]
    under_tmp = {p.parts[2] for p in shown if p.parts[1:2] == ("tmp",) and len(p.parts) > 2}
    assert marker.name not in report["tmp"]
    assert set(report["tmp"]) <= under_tmp
    assert not {e for e in report["env"] if e.startswith(("HEADWATER_HOME", "HEADWATER_METADATA"))}
    tasks = {t["name"]: t for t in summary["tasks"]}
    record = tasks["inside"]["sandbox"]
    assert record["pid_namespace"] is True and record["user_namespace"] is bool(prefix)
    limited = tasks["limited"]["sandbox"]["enforced"]
    assert limited["memory"].startswith("RLIMIT_AS 200000000 bytes above")
    shown = {t["name"]: t for t in headwater.show(summary["run_id"])["tasks"]}
    got, _, count = shown["limited"]["outputs"]["Output"].partition("|")
    assert got == "refused" and count == "1"  # 400 MB past a 200 MB limit; one CPU of two
    deadline = time.monotonic() + 5
    while _sleeping(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleeping(mark) == []  # what the task left ended with its sandbox


def _can_be_a_user() -> bool:
    """True if this machine runs a command as uid 1000 in a user namespace (`AS_A_USER`)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run([*AS_A_USER, "true"], capture_output=True).returncode == 0
