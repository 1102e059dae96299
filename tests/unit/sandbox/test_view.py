"""A sandbox's view as bubblewrap's arguments: what is shown, in which order, and what is
hidden inside what is shown."""

from __future__ import annotations

from pathlib import Path

from headwater.sandbox.view import View


def _pairs(argv: list[str], option: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == option]


def test_the_base_has_its_own_namespaces_and_a_private_tmp() -> None:
    argv = View(user_namespace=True).base().argv
    assert {"--unshare-pid", "--unshare-ipc", "--unshare-user", "--die-with-parent"} <= set(argv)
    assert ("/usr", "/usr") in _pairs(argv, "--ro-bind")
    assert "--unshare-net" not in argv  # tasks reach the network (data, object stores)
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert {"/tmp", "/var/tmp", "/dev/shm", "/dev"} <= set(tmpfs)
    assert "--dev" not in argv  # a devpts would nest a user namespace the task cannot join
    assert "--unshare-user" not in View(user_namespace=False).base().argv
    assert "--die-with-parent" not in View(user_namespace=True, lasting=True).base().argv


def test_a_hidden_folder_inside_what_is_shown_is_covered_and_own_paths_shown_inside(
    tmp_path: Path,
) -> None:
    shown = tmp_path / "env"
    home = shown / "home"
    workdir = home / "runs" / "r" / "tasks" / "t"
    workdir.mkdir(parents=True)
    token = shown / "token"
    token.write_text("t")
    data = tmp_path / "elsewhere" / "data"
    data.parent.mkdir()
    data.write_text("x")
    view = View(user_namespace=False).read_only(str(shown))
    view.hide([str(home), str(token), str(tmp_path / "not-shown")])
    view.own([str(data)], [str(workdir)])
    argv = view.argv
    assert argv.index("--tmpfs") > argv.index("--ro-bind")
    assert argv[argv.index("--tmpfs") + 1] == str(home)
    assert ("/dev/null", str(token)) in _pairs(argv, "--ro-bind")
    assert str(tmp_path / "not-shown") not in argv  # nothing to hide there
    assert (str(workdir), str(workdir)) in _pairs(argv, "--bind")
    assert (str(data), str(data)) in _pairs(argv, "--ro-bind")
    # Folders above a path inside the cover are made readable by anyone (a dropped uid's).
    made = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert str(home / "runs") in made and str(tmp_path / "elsewhere") in made
    assert argv.index(str(home / "runs")) < argv.index(str(workdir))


def test_secret_volumes_are_read_only_copies_of_their_values(tmp_path: Path) -> None:
    store = tmp_path / "secrets" / "db"
    view = View(user_namespace=False)
    mounts = [
        {"target": "/secrets/db", "source": str(store), "read_only": True},
        {"target": "/scratch", "source": "", "size": "1Mi"},
    ]
    view.volumes(mounts, {str(store / "password"): b"hunter2", "/other/key": b"no"})
    try:
        argv = view.argv
        ((fd, target),) = _pairs(argv, "--ro-bind-data")
        assert target == "/secrets/db/password"
        assert Path(f"/proc/self/fd/{fd}").read_bytes() == b"hunter2"
        assert str(store) not in argv  # never the store's own files
        assert ["--size", str(2**20), "--perms", "1777", "--tmpfs", "/scratch"] == argv[-6:]
    finally:
        view.close()
    assert view.fds == []
