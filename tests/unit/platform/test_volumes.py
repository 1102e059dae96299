"""Tests for volumes and task mounts: real mount namespaces, in a subprocess per case.

Each case runs `mount_all` in a fresh Python process (entering a namespace cannot be undone),
then checks, from outside, that nothing leaked onto the machine's own file system.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from headwater.errors import PlatformError
from headwater.platform.volumes import create_volume, delete_volume

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces")


def _namespaces_work() -> bool:
    """Whether a task process here may enter a mount namespace (probed in a throwaway one)."""
    probe = "from headwater.platform.volumes import enter_namespace; enter_namespace()"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _namespaces_work(), reason="this system refuses mount namespaces (tested by refusal)"
)


def _in_task(mounts: list[dict[str, Any]], stage: Path, check: str, prefix: list[str] = ()) -> Any:
    """Mount `mounts` in a new process, run `check` there (it sets `result`); return result."""
    script = (
        textwrap.dedent(
            f"""
        import json, os
        from headwater.errors import PlatformError
        from headwater.platform.volumes import mount_all
        try:
            mount_all({mounts!r}, stage={str(stage)!r})
        except PlatformError as exc:
            print(json.dumps({{"error": str(exc)}}))
            raise SystemExit(0)
        result = None
        """
        )
        + textwrap.dedent(check)
        + "\nprint(json.dumps({'result': result}))\n"
    )
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _mount(target: str, source: str = "", **extra: Any) -> dict[str, Any]:
    return {"target": target, "source": source, "what": "volume 'v'", **extra}


@needs_namespaces
def test_a_volume_is_bound_at_an_existing_path_for_the_task_only(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "in.txt").write_text("from the volume")
    target = tmp_path / "target"
    target.mkdir()
    out = _in_task(
        [_mount(str(target), str(volume), owned=True)],
        tmp_path / "stage",
        f"""
        result = open({str(target / "in.txt")!r}).read()
        open({str(target / "out.txt")!r}, "w").write("written")
        """,
    )
    assert out == {"result": "from the volume"}
    assert (volume / "out.txt").read_text() == "written"
    assert list(target.iterdir()) == []  # the machine's directory was never touched


@needs_namespaces
def test_a_missing_mount_point_is_made_under_a_cover_never_on_the_machine(
    tmp_path: Path,
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "keep.txt").write_text("kept")
    (host / "link").symlink_to("keep.txt")
    volume = tmp_path / "volume"
    volume.mkdir()
    target = host / "missing" / "deep"
    out = _in_task(
        [_mount(str(target), str(volume), owned=True)],
        tmp_path / "stage",
        f"""
        open({str(target / "f")!r}, "w").write("x")
        open({str(host / "keep.txt")!r}, "a").write(" and appended")
        result = sorted(os.listdir({str(host)!r})), os.readlink({str(host / "link")!r})
        """,
    )
    assert out == {"result": [["keep.txt", "link", "missing"], "keep.txt"]}
    assert (volume / "f").read_text() == "x"
    assert (host / "keep.txt").read_text() == "kept and appended"  # entries are the real ones
    assert not (host / "missing").exists()


@needs_namespaces
def test_a_new_top_level_directory_covers_root_and_keeps_the_working_directory(
    tmp_path: Path,
) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    top = f"/headwater-test-{uuid.uuid4().hex[:8]}"
    out = _in_task(
        [_mount(top, str(volume), owned=True)],
        tmp_path / "stage",
        f"""
        open({top + "/f"!r}, "w").write("x")
        result = os.getcwd(), sorted(set(os.listdir("/")) & {{"usr", "proc", "tmp"}})
        """,
    )
    assert out == {"result": [os.getcwd(), ["proc", "tmp", "usr"]]}
    assert (volume / "f").read_text() == "x"
    assert not os.path.exists(top)


@needs_namespaces
def test_two_mounts_under_one_new_directory_share_one_cover(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    top = f"/headwater-test-{uuid.uuid4().hex[:8]}"
    out = _in_task(
        [_mount(f"{top}/a", str(one), owned=True), _mount(f"{top}/b", str(two), owned=True)],
        tmp_path / "stage",
        f"""
        open({top + "/a/f"!r}, "w").write("1")
        open({top + "/b/f"!r}, "w").write("2")
        result = sorted(os.listdir({top!r})), os.path.ismount({top!r})
        """,
    )
    assert out["result"] == [["a", "b"], False]  # `b` was made in the first cover, no second
    assert (one / "f").read_text() == "1" and (two / "f").read_text() == "2"
    assert not os.path.exists(top)


@needs_namespaces
def test_a_mount_point_that_is_a_file_fails_naming_the_path_once_normalised(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("")
    out = _in_task([_mount(f"/{tmp_path}/./file", str(tmp_path))], tmp_path / "stage", "")
    assert out == {
        "error": f"cannot mount volume 'v' at {tmp_path / 'file'}: it exists and is not a directory"
    }


@needs_namespaces
def test_read_only_tmpfs_and_nested_mounts(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "password").write_text("pw")
    volume = tmp_path / "volume"
    volume.mkdir()
    data = tmp_path / "data"
    out = _in_task(
        [
            _mount(str(data), str(volume), owned=True),
            _mount(str(data / "secret"), str(secret), read_only=True),
            _mount(str(tmp_path / "mem"), "", size="1Mi", owned=True),
        ],
        tmp_path / "stage",
        f"""
        import errno
        try:
            open({str(data / "secret" / "new")!r}, "w")
            result = "writable"
        except OSError as exc:
            password = open({str(data / "secret" / "password")!r}).read()
            result = [errno.errorcode[exc.errno], password]
        big = b"x" * (2 << 20)
        try:
            open({str(tmp_path / "mem" / "big")!r}, "wb").write(big)
        except OSError as exc:
            result.append(errno.errorcode[exc.errno])
        """,
    )
    assert out == {"result": ["EROFS", "pw", "ENOSPC"]}
    assert (volume / "secret").is_dir()  # a mount point inside a volume is made there
    assert not (secret / "new").exists()
    assert not (tmp_path / "mem").exists()


def _unprivileged(limit_namespaces: bool) -> list[str]:
    """A prefix that runs a command as root of a user namespace without CAP_SYS_ADMIN."""
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs util-linux unshare and setpriv")
    limit = "echo 0 > /proc/sys/user/max_user_namespaces && " if limit_namespaces else ""
    probe = subprocess.run(["unshare", "-r", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this system refuses user namespaces outright")
    return [
        "unshare",
        "-r",
        "sh",
        "-c",
        f'{limit}exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- "$@"',
        "sh",
    ]


def test_without_privilege_the_task_makes_its_own_user_namespace(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("v")
    target = tmp_path / "host" / "missing"
    target.parent.mkdir()
    out = _in_task(
        [
            _mount(str(target), str(volume), owned=True),
            _mount(str(tmp_path / "host" / "ro"), str(secret), read_only=True),
        ],
        tmp_path / "stage",
        f"""
        import errno
        open({str(target / "f")!r}, "w").write("x")
        try:
            open({str(tmp_path / "host" / "ro" / "key")!r}, "w")
        except OSError as exc:
            refused = errno.errorcode[exc.errno]
        result = open("/proc/self/uid_map").read().split() + [refused]
        """,
        prefix=_unprivileged(limit_namespaces=False),
    )
    # A nested user namespace mapping the user to itself; the read-only bind holds there too.
    assert out == {"result": ["0", "0", "1", "EROFS"]}
    assert (volume / "f").read_text() == "x"
    assert sorted(p.name for p in (tmp_path / "host").iterdir()) == []


def test_a_refused_namespace_fails_naming_the_mount_path_and_the_fix(tmp_path: Path) -> None:
    out = _in_task(
        [_mount("//data", str(tmp_path), owned=True)],  # named once, normalised
        tmp_path / "stage",
        "result = 'mounted'",
        prefix=_unprivileged(limit_namespaces=True),
    )
    assert "error" in out, out
    assert out["error"].startswith(
        "cannot mount volume 'v' at /data: this system refuses a private mount namespace "
        "(the user namespace limit, user.max_user_namespaces, is reached)"
    )
    assert "unprivileged_userns_clone" in out["error"]


def test_create_reuse_clone_and_delete_volumes(tmp_path: Path) -> None:
    root = tmp_path / "volumes"
    assert create_volume(str(root), "a") is True
    (root / "a" / "f").write_text("x")
    assert create_volume(str(root), "a") is False  # a fixed name used again keeps its data
    assert (root / "a" / "f").read_text() == "x"
    assert create_volume(str(root), "b", clone="a") is True
    assert (root / "b" / "f").read_text() == "x"
    delete_volume(str(root), "a")
    assert sorted(p.name for p in root.iterdir()) == ["b"]
    with pytest.raises(PlatformError, match="cannot delete volume 'a': there is none"):
        delete_volume(str(root), "a")
