"""kfp-kubernetes settings, emulated: real pipelines compiled with `kfp.kubernetes`, run by the CLI.

Secrets and config maps reach tasks as variables and files from `headwater secrets`; a missing
one fails its task before it starts; field paths, labels and annotations are visible as on a
pod; a volume made by CreatePVC carries data from one task to the next and is deleted; what
has no meaning on one machine is one warning line per task. Mounts need a private mount
namespace: where the system refuses one, the task fails naming the mount path.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import Cli, CliResult, cached_flags, pipeline, run_failed, run_ok, task_states

pytestmark = pytest.mark.integration

PASSWORD = "s3cret-Hunter2-value"
# sha256(PASSWORD)[:12], as the components report it instead of the value
PASSWORD_DIGEST = __import__("hashlib").sha256(PASSWORD.encode()).hexdigest()[:12]


def _mounts_work() -> bool:
    """Whether a task here may enter a mount namespace (probed in a throwaway process)."""
    probe = "from headwater.platform.volumes import enter_namespace; enter_namespace()"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


#: For the tests whose tasks mount volumes; where mounts are refused, the refusal is tested.
needs_mounts = pytest.mark.skipif(not _mounts_work(), reason="this system refuses mounts")


def _set(headwater: Cli, *args: str, stdin: str | None = None) -> CliResult:
    proc = subprocess.run(
        headwater.argv("secrets", "set", *args),
        input=stdin,
        capture_output=True,
        text=True,
        env=headwater.env,
        cwd=headwater.cwd,
        timeout=headwater.timeout,
    )
    return CliResult.of(proc.returncode, proc.stdout, proc.stderr)


def _files_holding(root: Path, text: str, skip: Path) -> list[str]:
    """Files under `root` (not under `skip`) whose bytes contain `text`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and skip not in path.parents and text.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


def _store_secrets(headwater: Cli) -> None:
    assert _set(headwater, "db", stdin=PASSWORD).returncode == 2  # a name but no key
    result = _set(headwater, "db", "password", stdin=PASSWORD)  # the value from stdin
    assert result.returncode == 0, result.describe()
    assert _set(headwater, "--config-map", "settings", "mode=fast").returncode == 0


@needs_mounts
def test_secrets_and_config_maps_reach_the_task_as_env_and_files_and_nowhere_else(
    headwater: Cli,
) -> None:
    _store_secrets(headwater)
    result = headwater.run("k8s_secrets")
    summary = run_ok(result)
    assert summary["outputs"]["Output"] == f"{PASSWORD_DIGEST}|password|fast|[]"
    env_output = headwater.show(summary["run_id"])
    assert PASSWORD not in json.dumps(env_output)
    # The value is in the secret store and nowhere else: not in logs, run.json, the metadata
    # store, executor inputs or the console.
    assert _files_holding(headwater.home, PASSWORD, skip=headwater.home / "secrets") == []
    assert PASSWORD not in result.stdout + result.stderr


def test_a_secret_the_task_prints_or_fails_with_is_masked_everywhere_it_is_written(
    headwater: Cli,
) -> None:
    _store_secrets(headwater)
    result = headwater.run("k8s_secret_leak")

    summary = run_failed(result)
    [task] = summary["tasks"]
    assert task["error"]["message"] == "cannot connect with password '***'"
    assert PASSWORD not in result.stdout + result.stderr
    run_dir = headwater.home / "runs" / summary["run_id"]
    [log] = run_dir.rglob("log.txt")
    # The output is there, masked: printed, written in two halves, written by a child.
    lines = log.read_text().splitlines()
    assert {"printed: ***", "split: ***", "child: ***"} <= set(lines), lines
    [error] = run_dir.rglob("error.json")
    assert "'***'" in json.loads(error.read_text())["message"]
    assert "'***'" in (run_dir / "run.json").read_text()
    # Not in any file Headwater wrote: logs, error.json, run.json, the metadata store's bytes.
    assert _files_holding(headwater.home, PASSWORD, skip=headwater.home / "secrets") == []
    with contextlib.closing(sqlite3.connect(headwater.home / "metadata.db")) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = repr([db.execute(f'SELECT * FROM "{table}"').fetchall() for table in tables])
    assert "***" in rows and PASSWORD not in rows
    # The UI's API over the same store serves the run and the log masked.
    pytest.importorskip("fastapi")
    base = f"/api/v1/runs/{summary['run_id']}"
    shown, served = _ui_get(headwater, base, f"{base}/tasks/leak/log")
    assert "'***'" in shown and PASSWORD not in shown
    assert "printed: ***" in served and PASSWORD not in served


def _ui_get(headwater: Cli, *paths: str) -> list[str]:
    """The bodies of GET `paths` from the UI app over `headwater`'s store, in process."""
    import asyncio

    import httpx

    from headwater.ui import create_app

    async def get() -> list[str]:
        app = create_app(f"sqlite:///{headwater.home / 'metadata.db'}")
        transport = httpx.ASGITransport(app=app)
        base = "http://127.0.0.1:8080"  # a loopback Host: BrowserGuard refuses other names
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            responses = [await client.get(path) for path in paths]
        for response in responses:
            assert response.status_code == 200, response.text
        return [response.text for response in responses]

    with pytest.MonkeyPatch.context() as patch:  # where the UI finds the runs folder
        patch.setenv("HEADWATER_HOME", str(headwater.home))
        return asyncio.run(get())


@needs_mounts
def test_an_optional_secret_that_exists_is_given_and_one_that_does_not_is_left_unset(
    headwater: Cli,
) -> None:
    _store_secrets(headwater)
    assert _set(headwater, "tokens", "token=tok-1").returncode == 0
    first = run_ok(headwater.run("k8s_secrets"))
    runs = headwater.show(first["run_id"])
    outputs = {t["name"]: t.get("outputs") for t in runs["tasks"]}
    assert outputs["from-env"] == {"Output": f"{PASSWORD_DIGEST}|tok-1|fast"}
    second = run_ok(headwater.run("k8s_secrets", "--no-cache", params={"token_secret": "nope"}))
    outputs = {t["name"]: t.get("outputs") for t in headwater.show(second["run_id"])["tasks"]}
    assert outputs["from-env"] == {"Output": f"{PASSWORD_DIGEST}|<unset>|fast"}


def test_a_missing_secret_fails_the_task_before_it_starts_naming_it(headwater: Cli) -> None:
    assert _set(headwater, "--config-map", "settings", "mode=fast").returncode == 0
    result = headwater.run("k8s_secrets")
    summary = run_failed(result)
    assert task_states(summary) == {"from-env": "FAILED", "from-files": "CANCELED"}
    error = next(t for t in summary["tasks"] if t["name"] == "from-env")["error"]
    assert error["error_type"] == "PlatformError"
    assert "secret 'db' (for $DB_PASSWORD) is not in" in error["message"]
    assert "headwater secrets set db password=VALUE" in error["message"]
    assert "secret 'db'" in result.stderr
    task_dirs = list((headwater.home / "runs" / summary["run_id"] / "tasks").glob("*"))
    assert not any((d / "log.txt").exists() for d in task_dirs)  # it never started


@needs_mounts
def test_a_changed_secret_value_is_a_cache_miss(headwater: Cli) -> None:
    _store_secrets(headwater)
    run_ok(headwater.run("k8s_secrets"))
    assert cached_flags(run_ok(headwater.run("k8s_secrets"))) == {
        "from-env": True,
        "from-files": True,
    }
    assert _set(headwater, "db", "password=another").returncode == 0
    assert cached_flags(run_ok(headwater.run("k8s_secrets"))) == {
        "from-env": False,
        "from-files": False,
    }


@needs_mounts
def test_resume_keeps_the_platform_settings(headwater: Cli) -> None:
    assert _set(headwater, "--config-map", "settings", "mode=fast").returncode == 0
    failed = run_failed(headwater.run("k8s_secrets"))
    _store_secrets(headwater)
    resumed = run_ok(headwater("run", "--resume", failed["run_id"], "--json"))
    assert resumed["outputs"]["Output"] == f"{PASSWORD_DIGEST}|password|fast|[]"


def test_field_paths_labels_and_annotations_and_one_warning_per_task(headwater: Cli) -> None:
    result = headwater.run("k8s_pod")
    summary = run_ok(result)
    info = summary["outputs"]["Output"]
    run_id = summary["run_id"]
    assert info["POD_NAME"].startswith(f"{run_id}-")
    assert info["NAMESPACE"] == "default"
    assert info["TEAM"] == "ml" and info["NOTE"] == "hello there"
    assert info["RUN_LABEL"] == run_id
    assert info["POD_IP"] == "127.0.0.1" and info["NODE"]
    warnings = [line for line in result.stderr.splitlines() if "kfp-kubernetes" in line]
    assert warnings == [
        "headwater: warning: task 'pod-info': kfp-kubernetes settings with no meaning on one "
        "machine are ignored: image pull secrets, node selector, tolerations"
    ]
    pod = json.loads(
        (headwater.home / "runs" / run_id / "tasks" / "pod-info" / "pod.json").read_text()
    )
    assert pod["labels"]["team"] == "ml" and pod["annotations"]["note"] == "hello there"
    assert pod["uid"] == info["POD_UID"]


@needs_mounts
def test_a_volume_carries_data_between_tasks_and_is_deleted_after(headwater: Cli) -> None:
    summary = run_ok(headwater.run("k8s_pvc"))
    assert summary["outputs"]["Output"] == "hello through a volume|[]"
    assert task_states(summary) == {
        "createpvc": "SUCCEEDED",
        "write": "SUCCEEDED",
        "read": "SUCCEEDED",
        "deletepvc": "SUCCEEDED",
    }
    shown = headwater.show(summary["run_id"])
    name = next(t for t in shown["tasks"] if t["name"] == "createpvc")["outputs"]["name"]
    assert name.endswith("-k8s-pvc")
    volumes = headwater.home / "volumes"
    assert volumes.is_dir() and list(volumes.iterdir()) == []  # DeletePVC removed it
    assert not Path("/data/shared").exists()  # the mount was the task's own
    again = run_ok(headwater.run("k8s_pvc", params={"text": "second"}))
    # CreatePVC is never a cache hit, and `read` mounts the new volume, so it runs again.
    assert again["outputs"]["Output"] == "second|[]"


def _refusing_namespaces() -> list[str]:
    """A prefix that runs a command where no mount namespace can be made (as some CI runners)."""
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs util-linux unshare and setpriv")
    if subprocess.run(["unshare", "-r", "true"], capture_output=True).returncode != 0:
        if _mounts_work():
            pytest.skip("no user namespaces to limit, yet this process may mount (as root)")
        return []  # this system refuses them already
    return [
        "unshare",
        "-r",
        "sh",
        "-c",
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        'exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- "$@"',
        "sh",
    ]


def test_where_the_system_refuses_a_mount_the_task_fails_naming_the_path(
    headwater: Cli,
) -> None:
    argv = [*_refusing_namespaces(), *headwater.argv("run", pipeline("k8s_pvc"), "--json")]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=headwater.env, cwd=headwater.cwd, timeout=60
    )
    summary = run_failed(CliResult.of(proc.returncode, proc.stdout, proc.stderr))
    error = next(t for t in summary["tasks"] if t["name"] == "write")["error"]
    assert error["error_type"] == "PlatformError"
    assert error["message"].startswith("cannot mount volume '")
    assert "at /data: this system refuses a private mount namespace" in error["message"]


def test_secrets_cli_set_list_delete_never_prints_values(headwater: Cli) -> None:
    assert _set(headwater, "db", f"password={PASSWORD}", "user=bob").returncode == 0
    value_file = headwater.cwd / "token.txt"
    value_file.write_bytes(b"tok\n")
    assert _set(headwater, "db", "--from-file", f"token={value_file}").returncode == 0
    listed = headwater("secrets", "list", "--json")
    assert json.loads(listed.stdout) == [{"name": "db", "keys": ["password", "token", "user"]}]
    assert (headwater.home / "secrets" / "db" / "token").read_bytes() == b"tok\n"
    assert headwater("secrets", "delete", "db", "user").returncode == 0
    assert headwater("secrets", "list", "db").stdout == "db\tpassword, token\n"
    bad = _set(headwater, "Bad_Name", "k=v")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "secret name 'Bad_Name' is not valid" in bad.stderr
    missing = headwater("secrets", "delete", "nope")
    assert missing.returncode == 2
    assert missing.stderr == (
        f"headwater: error: no secret 'nope' in {headwater.home / 'secrets'} (secrets: db)\n"
    )
    assert headwater("secrets", "delete", "db").returncode == 0
    assert headwater("secrets", "list").stdout == ""
    assert PASSWORD not in listed.stdout + listed.stderr


def test_a_secret_named_by_a_parameter_inside_loops_and_nested_pipelines(headwater: Cli) -> None:
    assert _set(headwater, "db", "password=four").returncode == 0
    assert _set(headwater, "other", "password=sixsix").returncode == 0
    assert run_ok(headwater.run("k8s_nested"))["outputs"]["Output"] == ["1:4", "2:4"]
    summary = run_ok(headwater.run("k8s_nested", params={"secret": "other"}))
    assert summary["outputs"]["Output"] == ["1:6", "2:6"]
    tasks = {t["name"]: t.get("outputs") for t in headwater.show(summary["run_id"])["tasks"]}
    assert tasks["inner.password-length"] == {"Output": "0:6"}


def test_a_task_past_its_timeout_is_stopped_and_fails(headwater: Cli) -> None:
    result = headwater.run("k8s_timeout")
    summary = run_failed(result)
    error = summary["tasks"][0]["error"]
    assert "SIGALRM" in error["message"], error
    log = headwater.home / "runs" / summary["run_id"] / "tasks" / "nap" / "log.txt"
    assert "if it runs longer than 1 s (kubernetes.set_timeout)" in log.read_text()


def test_an_unusable_store_is_one_line_exit_2(headwater: Cli) -> None:
    not_a_dir = headwater.cwd / "home-is-a-file"
    not_a_dir.write_text("")
    cli = headwater._replace(env={**headwater.env, "HEADWATER_HOME": str(not_a_dir)})
    result = _set(cli, "db", "password=x")
    assert result.returncode == 2
    assert result.stderr == (
        f"headwater: error: cannot use the secret store: {not_a_dir / 'secrets'}: Not a directory\n"
    )
