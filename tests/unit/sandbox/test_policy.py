"""What of the machine's environment sandboxed tasks and their fork server inherit, and the
check that names what is missing when the machine cannot sandbox."""

from __future__ import annotations

import pytest

from headwater.errors import SandboxError
from headwater.sandbox import policy

MACHINE = {
    "PATH": "/usr/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C",
    "HTTPS_PROXY": "http://proxy:3128",
    "OMP_NUM_THREADS": "2",
    "CUDA_VISIBLE_DEVICES": "0",
    "HOME": "/root",
    "HEADWATER_HOME": "/srv/hw",
    "HEADWATER_CONTAINERS": "auto",
    "CONTAINERS_CONF": "/etc/c.conf",
    "HEADWATER_TOKEN": "hwt_secret",
    "HEADWATER_METADATA_URL": "postgresql://u:pw@db/hw",
    "AWS_SECRET_ACCESS_KEY": "key",
    "PGPASSWORD": "pw",
    "GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json",
}


def test_a_task_inherits_where_programs_are_and_nothing_secret() -> None:
    assert policy.inherited_env(MACHINE) == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "HTTPS_PROXY": "http://proxy:3128",
        "OMP_NUM_THREADS": "2",
        "CUDA_VISIBLE_DEVICES": "0",
    }


def test_the_fork_server_also_keeps_its_home_and_runtimes_never_a_secret() -> None:
    kept = policy.fork_server_env(MACHINE)
    assert {"HOME", "HEADWATER_HOME", "HEADWATER_CONTAINERS", "CONTAINERS_CONF"} <= set(kept)
    secret = {"HEADWATER_TOKEN", "HEADWATER_METADATA_URL", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"}
    assert not secret & set(kept)
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in kept


def test_a_machine_without_bubblewrap_is_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxError) as info:
        policy.check_available()
    assert "bubblewrap (bwrap) is not installed" in str(info.value)
    assert "apt install bubblewrap" in str(info.value)


def test_a_bubblewrap_that_cannot_make_namespaces_is_quoted(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing = tmp_path / "bwrap"  # type: ignore[operator]
    refusing.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    refusing.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    policy._probe.cache_clear()
    with pytest.raises(SandboxError) as info:
        policy.check_available()
    message = str(info.value)
    assert "No permissions to create new namespace" in message
    assert "user.max_user_namespaces" in message and "\n" not in message
