"""The view of one sandbox, as bubblewrap's arguments: what it shows, read-only or writable.

Built from nothing (bubblewrap's root is an empty tmpfs), in this order, each later mount
over the earlier ones:

1. the system read-only: `/usr`, `/etc` and the `/bin`, `/lib*`, `/sbin` links or folders,
   the CPU topology in `/sys`; a `/dev` of the common devices (and the GPUs'), `/proc` of the
   sandbox's own PID namespace, a private `/tmp`, `/var/tmp` and `/dev/shm`;
2. the Python environment read-only: its prefixes and every folder on `sys.path`;
3. what the policy lets every task read (`SandboxPolicy.readable`);
4. what no task may see, hidden even inside the above: `$HEADWATER_HOME` and the policy's
   `hidden` paths (an empty tmpfs over a folder, `/dev/null` over a file);
5. the task's own paths: its inputs read-only, its folder, outputs and run workspace
   writable, parents before children;
6. its kfp-kubernetes volumes at their mount paths: volumes bound, secrets and config maps
   as read-only copies of their values (never the store's files), scratch space.

Every source path is the machine's; every target is the same path (artifact paths resolve
inside as outside), except kfp-kubernetes mounts, which go where the pipeline says.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["View", "python_paths"]

#: The system, read-only, where it is a folder (`/bin` and the like are links on most systems).
_SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
#: What of `/sys` a task may read: the CPU topology (`os.cpu_count`, BLAS thread pools).
_SYS = ("/sys/devices/system/cpu",)
#: The devices every task has, and the links to its own descriptors.
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
#: Devices a GPU task needs, bound where they exist.
_GPU_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "dri")


def python_paths() -> list[str]:
    """This interpreter's prefixes and the folders and archives on its `sys.path` (the
    current directory left out: it is where the server happened to start)."""
    cwd = os.getcwd()
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found += [p for p in sys.path if p and os.path.isabs(p) and p != cwd]
    executable = os.path.realpath(sys.executable)
    found.append(os.path.dirname(executable))
    return _unique(p for p in found if os.path.exists(p))


@dataclass
class View:
    """One sandbox's view, built up mount by mount; `argv` is bubblewrap's options.

    Args:
        user_namespace: Make a user namespace (an engine that is not root); a root engine
            needs none and its task drops to another uid instead.
        lasting: See the attribute.
    """

    user_namespace: bool
    #: It outlives its caller (a model server): no `--die-with-parent`.
    lasting: bool = False
    argv: list[str] = field(default_factory=list)
    #: Descriptors bubblewrap reads data from (`--ro-bind-data`); the caller passes and closes them.
    fds: list[int] = field(default_factory=list)
    #: Paths mounted so far (targets), to hide what lies inside them.
    _shown: list[str] = field(default_factory=list)
    #: Folders made so far to mount on (bubblewrap's own are 0700: no use to a task's uid).
    _made: set[str] = field(default_factory=lambda: {"/"})
    #: Folders covered by an empty tmpfs: what is shown inside them needs its folders made.
    _hidden: list[str] = field(default_factory=list)
    #: What is shown read-only from the machine (the system, Python): a path inside needs
    #: no mount of its own.
    _read_only: list[str] = field(default_factory=list)

    def base(self) -> View:
        """The namespaces, the system read-only, fresh `/dev`, `/proc` and temporary space."""
        self.argv += ["--unshare-pid", "--unshare-ipc"]
        if not self.lasting:
            self.argv.append("--die-with-parent")
        if self.user_namespace:
            self.argv.append("--unshare-user")
        for path in _SYSTEM:
            if os.path.islink(path):
                self.argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                self.read_only(path)
        for path in _SYS:
            if os.path.isdir(path):
                self.read_only(path)
        # /dev by hand, not bubblewrap's --dev: that mounts a devpts, for which it nests a
        # second user namespace the task could not join the mount namespace from.
        self.argv += ["--perms", "0755", "--tmpfs", "/dev"]
        for name in _DEVICES:
            self._device(os.path.join("/dev", name))
        for name, target in _DEV_LINKS:
            self.argv += ["--symlink", target, os.path.join("/dev", name)]
        self.argv += ["--proc", "/proc"]
        for name in _GPU_DEVICES:
            self._device(os.path.join("/dev", name))
        for name in sorted(os.listdir("/dev")) if os.path.isdir("/dev") else ():
            if name.startswith("nvidia") and name[6:].isdigit():
                self._device(os.path.join("/dev", name))
        for path in ("/tmp", "/var/tmp", "/dev/shm"):
            self.argv += ["--perms", "1777", "--tmpfs", path]
        return self

    def _device(self, path: str) -> None:
        if os.path.exists(path):
            self.argv += ["--dev-bind", path, path]

    def read_only(self, *paths: str) -> View:
        """Show each of `paths` (that exists) read-only at its own path."""
        for path in paths:
            if not os.path.exists(path) or self._within_shown(path):
                continue  # shown already, read-only, by a folder above it
            self._parents(path)
            self.argv += ["--ro-bind", path, path]
            self._shown.append(path)
            self._read_only.append(path)
        return self

    def _within_shown(self, path: str) -> bool:
        """True if `path` is shown already, read-only, by a folder above it."""
        if any(_inside(path, h) for h in self._hidden):
            return False
        return any(_inside(path, s) for s in self._read_only)

    def _parents(self, target: str) -> None:
        """Make each folder above `target` that no mount provides, readable by anyone."""
        parts = os.path.normpath(target).split("/")[1:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            if folder in self._made:
                continue
            covered = any(_inside(folder, h) for h in self._hidden)
            if not covered and any(_inside(folder, s) for s in self._shown):
                continue  # it exists in what a mount shows
            self.argv += ["--perms", "0755", "--dir", folder]
            self._made.add(folder)

    def writable(self, *paths: str) -> View:
        """Show each of `paths` (made if missing) writable at its own path."""
        for path in paths:
            os.makedirs(path, exist_ok=True)
            self._parents(path)
            self.argv += ["--bind", path, path]
            self._shown.append(path)
        return self

    def hide(self, paths: Iterable[str]) -> View:
        """Cover each of `paths` that lies inside what is shown: a folder by an empty tmpfs,
        a file by `/dev/null`."""
        for path in _unique(os.path.abspath(p) for p in paths if p):
            if not any(_inside(path, shown) for shown in self._shown):
                continue  # not shown at all
            if os.path.isdir(path):
                self.argv += ["--tmpfs", path]
                self._hidden.append(path)
            elif os.path.lexists(path):
                self.argv += ["--ro-bind", "/dev/null", path]
        return self

    def own(self, read: Sequence[str], write: Sequence[str]) -> View:
        """The task's own paths, parents before children: a writable folder may hold an input
        (read-only still), and an input folder a writable one."""
        items = [(p, False) for p in _unique(read)] + [(p, True) for p in _unique(write)]
        for path, rw in sorted(items, key=lambda item: (item[0].rstrip("/").count("/"), item[1])):
            if rw:
                self.writable(path)
            else:
                self.read_only(path)
        return self

    def volumes(self, mounts: Sequence[Mapping[str, Any]], values: Mapping[str, bytes]) -> View:
        """kfp-kubernetes mounts (`Mount.to_payload()` dicts, parents first).

        Args:
            mounts: What to mount where.
            values: For a secret's or config map's mount, the bytes of each of its files by
                the file's path in the store (read by the caller, which may read the store):
                the task gets copies, read-only.
        """
        for mount in mounts:
            target = os.path.normpath("/" + str(mount["target"]).lstrip("/"))
            self._mount_point(target)
            self._parents(target)
            source = str(mount.get("source") or "")
            if mount.get("read_only") and source and not mount.get("owned"):
                self._copies(source, target, values)
            elif source:  # made (and emptied, if fresh) by the caller
                os.makedirs(source, exist_ok=True)
                self.argv += ["--ro-bind" if mount.get("read_only") else "--bind", source, target]
            else:
                size = mount.get("size")
                if size:
                    from headwater.platform.volumes import quantity_bytes

                    self.argv += ["--size", str(quantity_bytes(str(size)))]
                mode = "0755" if mount.get("read_only") else "1777"
                self.argv += ["--perms", mode, "--tmpfs", target]
        return self

    def _mount_point(self, target: str) -> None:
        """Make room for a mount at `target` where it lies in a read-only folder shown from
        the machine (`/etc/db`): that folder is covered by a tmpfs holding each of its
        entries bound back read-only, plus the new mount point (as a pod's would be)."""
        if os.path.exists(target) or not any(_inside(target, s) for s in self._shown):
            return
        if any(_inside(target, h) for h in self._hidden):
            return
        folder = os.path.dirname(target)
        while not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        self.argv += ["--perms", "0755", "--tmpfs", folder]
        for name in sorted(os.listdir(folder)):
            entry = os.path.join(folder, name)
            if os.path.islink(entry):
                self.argv += ["--symlink", os.readlink(entry), entry]
            elif os.path.exists(entry):
                self.argv += ["--ro-bind", entry, entry]
        self._hidden.append(folder)  # folders made inside it need making, as in a cover

    def _copies(self, source: str, target: str, values: Mapping[str, bytes]) -> None:
        """A secret's or config map's folder as read-only copies of its files' values."""
        self.argv += ["--perms", "0755", "--dir", target]
        prefix = source.rstrip("/") + "/"
        for path in sorted(p for p in values if p.startswith(prefix)):
            fd = os.memfd_create("headwater-value", os.MFD_CLOEXEC)
            os.write(fd, values[path])
            os.lseek(fd, 0, os.SEEK_SET)
            os.set_inheritable(fd, True)
            self.fds.append(fd)
            name = os.path.join(target, path[len(prefix) :])
            self.argv += ["--perms", "0444", "--ro-bind-data", str(fd), name]

    def close(self) -> None:
        """Close the descriptors of copied values (bubblewrap has read them)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _unique(paths: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for path in paths:
        seen.setdefault(os.path.normpath(path), None)
    return list(seen)
