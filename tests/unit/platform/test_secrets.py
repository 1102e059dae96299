"""Tests for the local secret and config-map store: layout, permissions, validation, digests."""

import os
import stat
from pathlib import Path

import pytest

from headwater.errors import NotFoundError, PlatformError
from headwater.platform.secrets import CONFIG_MAP, SECRET, LocalSecretStore


@pytest.fixture
def store(tmp_path: Path) -> LocalSecretStore:
    return LocalSecretStore.for_home(tmp_path / "home", SECRET)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_set_writes_one_private_file_per_key_whatever_the_umask(store: LocalSecretStore) -> None:
    old = os.umask(0)  # the most permissive umask: the store must not depend on it
    try:
        store.set("db", {"password": b"hunter2", "user": b"bob"})
    finally:
        os.umask(old)
    assert (store.root / "db" / "password").read_bytes() == b"hunter2"
    assert _mode(store.root) == 0o700
    assert _mode(store.root / "db") == 0o700
    assert _mode(store.root / "db" / "password") == 0o600
    assert store.keys("db") == ["password", "user"]
    assert store.names() == ["db"]


def test_set_keeps_other_keys_and_tightens_a_loose_directory(store: LocalSecretStore) -> None:
    store.set("db", {"password": b"a"})
    os.chmod(store.root / "db", 0o755)
    store.set("db", {"token": b"t"})
    assert store.keys("db") == ["password", "token"]
    assert store.read("db", "password") == b"a"
    assert _mode(store.root / "db") == 0o700


def test_config_maps_live_beside_secrets(tmp_path: Path) -> None:
    maps = LocalSecretStore.for_home(tmp_path, CONFIG_MAP)
    maps.set("cfg", {"mode": b"fast"})
    assert (tmp_path / "configmaps" / "cfg" / "mode").read_bytes() == b"fast"
    assert LocalSecretStore.for_home(tmp_path, SECRET).names() == []


@pytest.mark.parametrize(
    "name",
    ["Upper", "../escape", "a/b", "-lead", "trail-", "", "x" * 254, "under_score"],
    ids=["upper", "dotdot", "slash", "lead", "trail", "empty", "long", "underscore"],
)
def test_invalid_names_are_refused_before_any_file_is_touched(
    store: LocalSecretStore, name: str
) -> None:
    with pytest.raises(PlatformError, match="secret name"):
        store.set(name, {"k": b"v"})
    assert not store.root.exists()


@pytest.mark.parametrize("key", ["..", ".", "a/b", "", "sp ace"], ids=str)
def test_invalid_keys_are_refused(store: LocalSecretStore, key: str) -> None:
    with pytest.raises(PlatformError, match="secret key"):
        store.set("db", {key: b"v"})


def test_delete_a_key_then_the_secret(store: LocalSecretStore) -> None:
    store.set("db", {"password": b"a", "user": b"b"})
    store.delete("db", ["user"])
    assert store.keys("db") == ["password"]
    with pytest.raises(NotFoundError, match="has no key 'user'"):
        store.delete("db", ["user"])
    store.delete("db")
    assert store.names() == []
    with pytest.raises(NotFoundError, match=r"no secret 'db' in .* \(secrets: none\)"):
        store.delete("db")


def test_digest_changes_with_a_value_and_only_then(store: LocalSecretStore) -> None:
    assert store.digest("db") is None  # no such secret
    store.set("db", {"password": b"a", "user": b"b"})
    first = store.digest("db")
    assert first == store.digest("db")
    assert store.digest("db", ["password"]) != first
    store.set("db", {"user": b"c"})
    assert store.digest("db") != first
    assert store.digest("db", ["password"]) == LocalSecretStore(store.root).digest(
        "db", ["password"]
    )


def test_digest_is_keyed_so_it_reveals_nothing_about_the_value(tmp_path: Path) -> None:
    one = LocalSecretStore.for_home(tmp_path / "one")
    two = LocalSecretStore.for_home(tmp_path / "two")
    one.set("db", {"password": b"same"})
    two.set("db", {"password": b"same"})
    assert one.digest("db") != two.digest("db")  # a random key per store
    assert _mode(one.root / ".digest-key") == 0o600
    assert one.names() == ["db"]  # the key file is not a secret name
