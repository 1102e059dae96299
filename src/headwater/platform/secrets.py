"""The local store of secrets and config maps: `$HEADWATER_HOME/secrets/NAME/KEY`.

What a cluster keeps as Secret and ConfigMap objects, Headwater keeps as files: one directory
per name, one file per key, the file's bytes the value. Secrets live under `secrets/`, config
maps under `configmaps/`; directories are made 0700 and files 0600, whatever the umask, so
only their owner can read them. Names and keys follow Kubernetes' rules (a DNS subdomain; a
key of letters, digits, `-`, `_` and `.`), which also keeps every path inside the store.

Values never leave this module except into the task that asked for them: nothing here logs
them, and `digest` gives the cache a keyed hash (HMAC with a random key kept beside the
values), so a cache key can change when a value changes without revealing anything about it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from headwater.errors import NotFoundError, PlatformError

SECRET = "secret"
CONFIG_MAP = "config map"

_DIRS = {SECRET: "secrets", CONFIG_MAP: "configmaps"}
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")
_DIGEST_KEY = ".digest-key"


def check_name(name: str, kind: str = SECRET) -> str:
    """Return `name` if it is a valid Kubernetes object name (a DNS subdomain).

    Raises:
        PlatformError: It is not; the message shows the name and the rule.
    """
    if not isinstance(name, str) or len(name) > 253 or not _NAME.match(name):
        raise PlatformError(
            f"{kind} name {name!r} is not valid: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit (at most 253 characters)"
        )
    return name


def check_key(key: str, kind: str = SECRET) -> str:
    """Return `key` if it is a valid Secret/ConfigMap data key.

    Raises:
        PlatformError: It is not; the message shows the key and the rule.
    """
    if not isinstance(key, str) or len(key) > 253 or not _KEY.match(key) or key in (".", ".."):
        raise PlatformError(
            f"{kind} key {key!r} is not valid: use letters, digits, '-', '_' and '.' "
            "(at most 253 characters, not '.' or '..')"
        )
    return key


class LocalSecretStore:
    """Secrets (or config maps) as files: one directory per name, one file per key.

    Args:
        root: The store's directory (`$HEADWATER_HOME/secrets` for secrets).
        kind: `SECRET` or `CONFIG_MAP`; only used in messages.
    """

    def __init__(self, root: Path, kind: str = SECRET) -> None:
        self.root = Path(root)
        self.kind = kind

    @classmethod
    def for_home(cls, home: Path, kind: str = SECRET) -> LocalSecretStore:
        """The store of `kind` under a Headwater home directory."""
        return cls(Path(home) / _DIRS[kind], kind)

    def path(self, name: str) -> Path:
        """The directory holding `name`'s keys (validated, so always inside the store)."""
        return self.root / check_name(name, self.kind)

    def names(self) -> list[str]:
        """Every name in the store, sorted."""
        try:
            entries = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        return [e for e in entries if _NAME.match(e) and (self.root / e).is_dir()]

    def keys(self, name: str) -> list[str]:
        """The keys `name` holds, sorted.

        Raises:
            NotFoundError: There is no such name in the store.
        """
        path = self.path(name)
        try:
            entries = sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise NotFoundError(self._missing(name)) from exc
        return [e for e in entries if _KEY.match(e) and not e.startswith(".tmp-")]

    def exists(self, name: str) -> bool:
        """True if the store holds `name`."""
        return self.path(name).is_dir()

    def read(self, name: str, key: str) -> bytes | None:
        """The value of `key` in `name`, or None when either is missing."""
        try:
            return (self.path(name) / check_key(key, self.kind)).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def set(self, name: str, items: Mapping[str, bytes]) -> None:
        """Add or replace keys of `name` (other keys stay), creating it if needed.

        Each value is written to a private temporary file and renamed into place, so a task
        reading the store sees the old value or the new one, never half of one.
        """
        import tempfile

        for key in items:
            check_key(key, self.kind)
        path = self.path(name)
        _private_dir(self.root)
        _private_dir(path)
        for key, value in items.items():
            fd, tmp = tempfile.mkstemp(dir=path, prefix=".tmp-")  # mkstemp makes it 0600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(value)
                os.replace(tmp, path / key)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise

    def delete(self, name: str, keys: Iterable[str] = ()) -> None:
        """Delete `name`, or only the given `keys` of it.

        Raises:
            NotFoundError: `name`, or one of `keys`, is not in the store.
        """
        path = self.path(name)
        if not path.is_dir():
            raise NotFoundError(self._missing(name))
        keys = list(keys)
        if not keys:
            import shutil

            shutil.rmtree(path)
            return
        present = set(self.keys(name))
        for key in keys:
            if check_key(key, self.kind) not in present:
                raise NotFoundError(
                    f"{self.kind} {name!r} has no key {key!r} (keys: {', '.join(sorted(present))})"
                )
        for key in keys:
            os.unlink(path / key)

    def digest(self, name: str, keys: Iterable[str] | None = None) -> str | None:
        """A keyed hash of `name`'s values (of `keys` only, if given); None if it is missing.

        The key of the hash is random, made once per store and kept in it (0600), so the
        digest changes whenever a value does but cannot be used to guess a value.
        """
        import hashlib
        import hmac

        if not self.exists(name):
            return None
        chosen = sorted(self.keys(name) if keys is None else set(keys))
        mac = hmac.new(self._digest_key(), digestmod=hashlib.sha256)
        for key in chosen:
            value = self.read(name, key)
            mac.update(key.encode() + b"\0")
            mac.update(b"-" if value is None else b"%d:" % len(value) + value)
        return mac.hexdigest()

    def _digest_key(self) -> bytes:
        path = self.root / _DIGEST_KEY
        with contextlib.suppress(FileNotFoundError):
            return path.read_bytes()
        _private_dir(self.root)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
        return path.read_bytes()

    def _missing(self, name: str) -> str:
        known = ", ".join(self.names()) or "none"
        return f"no {self.kind} {name!r} in {self.root} ({self.kind}s: {known})"


def _private_dir(path: Path) -> None:
    """Make `path` a directory only its owner can enter (tightening an existing one)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
