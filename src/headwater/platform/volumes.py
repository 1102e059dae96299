"""Volumes: directories under `$HEADWATER_HOME/volumes`, and mounting them for one task.

A PVC is a directory (`CreatePVC` makes it, `DeletePVC` removes it). A task sees it, and any
secret, config map or scratch volume, at its mount path through a private mount namespace:
the task process leaves the machine's namespace (`unshare`), so what it mounts is seen by it
and its children only and vanishes with them. As root that needs only CLONE_NEWNS; anyone
else also makes a user namespace that maps their own uid and gid to themselves (Linux's
unprivileged user namespaces), so files keep their owners and the task its identity.

A mount point must exist. One inside a volume we mounted is made there, as Kubernetes does.
One on the machine's own file system is never made there: the nearest directory that exists
is covered, in the task's namespace only, by a tmpfs holding each of its entries bound back
(symlinks copied), plus the new mount point. Everything under it looks and behaves as before;
a new top-level directory (`/data`) covers `/` this way and enters it with `chroot`.

Covering `/` makes it a tmpfs for the task: a file the task writes directly in `/` (not in a
directory there) is its own and vanishes with it.

Where the system refuses (not Linux, user namespaces disabled, a container without the
privilege), the task fails before its component starts, naming the mount path and the cause.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from headwater.errors import PlatformError

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2
#: Linux statvfs flags of a mount that a bind remount must keep (a user namespace may not clear
#: them), with the mount flag of each. Numbers, not os.ST_*: most exist only on Linux.
_KEPT_FLAGS = (
    (2, MS_NOSUID),
    (4, MS_NODEV),
    (8, MS_NOEXEC),
    (1024, MS_NOATIME),
    (2048, MS_NODIRATIME),
    (4096, MS_RELATIME),
)
_REFUSALS = {
    errno.EPERM: "not permitted",
    errno.EACCES: "not permitted",
    errno.ENOSPC: "the user namespace limit, user.max_user_namespaces, is reached",
    errno.EINVAL: "not supported by this kernel",
}
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_UNITS |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|)\Z")


def create_volume(root: str, name: str, clone: str = "") -> bool:
    """Make volume `name` under `root` (a copy of volume `clone`, if given).

    Returns:
        False when it already existed (a fixed `pvc_name` used again): it is kept as is.
    """
    path = os.path.join(root, name)
    if os.path.isdir(path):
        return False
    os.makedirs(root, exist_ok=True)
    if clone:
        shutil.copytree(os.path.join(root, clone), path, symlinks=True)
    else:
        os.mkdir(path)
    return True


def delete_volume(root: str, name: str) -> None:
    """Remove volume `name` and everything in it.

    Raises:
        PlatformError: There is no such volume (KFP's DeletePVC fails alike).
    """
    path = os.path.join(root, name)
    if not os.path.isdir(path):
        raise PlatformError(f"cannot delete volume {name!r}: there is none in {root}")
    shutil.rmtree(path)


def mount_all(mounts: Sequence[Mapping[str, Any]], *, stage: str) -> None:
    """Enter a private mount namespace and mount each of `mounts`, parents first.

    Args:
        mounts: `Mount.to_payload()` dicts, sorted so that a parent comes before its child.
        stage: An empty directory of the task's own, used to build covering tmpfs mounts.

    Raises:
        PlatformError: The system refuses a mount namespace or a mount; the message names
            the mount path and why.
    """
    if not mounts:
        return
    where = f"cannot mount {mounts[0]['what']} at {_mount_point(mounts[0]['target'])}"
    if not sys.platform.startswith("linux"):
        raise PlatformError(
            f"{where}: that needs a Linux mount namespace, and this is {sys.platform}"
        )
    try:
        enter_namespace()
    except OSError as exc:
        reason = _REFUSALS.get(exc.errno or 0, exc.strerror or str(exc))
        raise PlatformError(
            f"{where}: this system refuses a private mount namespace ({reason}); allow "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
            "user.max_user_namespaces > 0; on Ubuntu 24.04+ also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or run as root"
        ) from exc
    owned: list[str] = []
    for number, mount in enumerate(mounts):
        try:
            _mount_one(mount, owned, os.path.join(stage, str(number)))
        except OSError as exc:
            raise PlatformError(
                f"cannot mount {mount['what']} at {_mount_point(mount['target'])}: "
                f"{exc.strerror or exc}"
            ) from exc


def _mount_point(path: str) -> str:
    """`path` normalised, with one leading slash (POSIX `normpath` keeps a leading `//`)."""
    return os.path.normpath("/" + str(path).lstrip("/"))


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    # The interpreter's own symbols include libc's; find_library would run ldconfig each time.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _unshare(libc: Any, flags: int) -> None:
    _check(libc.unshare(flags), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    result = _libc().mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


def enter_namespace() -> None:
    """Leave the machine's mount namespace; mounts made after this are this process's own.

    It cannot be undone: call it in the task process (or, to probe, in a throwaway one).

    Raises:
        OSError: The system refuses (not permitted, user namespaces disabled or limited).
    """
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    try:
        _unshare(libc, CLONE_NEWNS)  # enough with CAP_SYS_ADMIN (root), and keeps root's powers
    except OSError:
        _unshare(libc, CLONE_NEWUSER | CLONE_NEWNS)
        with open("/proc/self/setgroups", "w") as fh:
            fh.write("deny")
        with open("/proc/self/uid_map", "w") as fh:
            fh.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as fh:
            fh.write(f"{gid} {gid} 1")
    # Nothing mounted from now on may propagate back to the machine's namespace.
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def _mount_one(mount: Mapping[str, Any], owned: list[str], stage: str) -> None:
    target = _mount_point(mount["target"])
    source = mount["source"]
    if source:
        if mount.get("fresh"):
            shutil.rmtree(source, ignore_errors=True)
        os.makedirs(source, exist_ok=True)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise OSError(errno.ENOTDIR, "it exists and is not a directory")
    if not os.path.isdir(target):
        _make_mount_point(target, owned, stage)
    if source:
        _mount(source, target, None, MS_BIND | MS_REC)
    else:
        options = "mode=0755" + (
            f",size={quantity_bytes(mount.get('size') or '')}" if mount.get("size") else ""
        )
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
    if mount.get("read_only"):
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(target))
    if mount.get("owned"):
        owned.append(target)


def _make_mount_point(target: str, owned: list[str], stage: str) -> None:
    """Make directory `target`, never on the machine's own file system (see the module doc)."""
    parent = target
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    if any(parent == o or parent.startswith(o.rstrip("/") + "/") for o in owned):
        os.makedirs(target)  # inside a volume of ours, as Kubernetes makes it
        return
    cwd = os.getcwd()
    os.makedirs(stage, exist_ok=True)
    mode = os.stat(parent).st_mode & 0o7777
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode:o}")
    for entry in os.listdir(parent):
        original = os.path.join(parent, entry)
        copy = os.path.join(stage, entry)
        try:
            if os.path.islink(original):
                os.symlink(os.readlink(original), copy)
                continue
            if os.path.isdir(original):
                os.mkdir(copy)
            else:
                open(copy, "wb").close()  # an empty file to bind the original onto
            _mount(original, copy, None, MS_BIND | MS_REC)
        except FileNotFoundError:
            continue  # gone while we looked
    os.makedirs(os.path.join(stage, os.path.relpath(target, parent)))
    if parent == "/":
        # "/" cannot be covered by a move alone: move the tmpfs there and make it our root.
        os.chdir(stage)
        _mount(stage, "/", None, MS_MOVE)
        os.chroot(".")
    else:
        _mount(stage, parent, None, MS_MOVE)
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    # If `stage` lay under `parent`, binding the entries copied the tmpfs there too: drop it.
    # (Its result is ignored: usually there is no such copy to drop.)
    _libc().umount2(stage.encode(), MNT_DETACH)
    # The directories made in the cover are the task's own: later mount points go in directly.
    owned.append(os.path.join(parent, os.path.relpath(target, parent).split(os.sep)[0]))


def _kept_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEPT_FLAGS if flags & st)


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes quantity ('1Gi', '500M', '1024') in bytes, for a tmpfs size."""
    match = _QUANTITY.match(quantity.strip())
    if not match or match.group(2) not in _UNITS:
        raise OSError(errno.EINVAL, f"size limit {quantity!r} is not a Kubernetes quantity")
    return int(float(match.group(1)) * _UNITS[match.group(2)])
