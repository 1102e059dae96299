"""Local or remote URIs, and confinement to a root with `..` and symlinks resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.paths import is_remote_uri, local_path, resolve_inside, scheme_of


@pytest.mark.parametrize(
    ("uri", "scheme", "local"),
    [
        ("/data/x", "file", "/data/x"),
        ("relative/x", "file", "relative/x"),
        ("", "file", ""),
        ("file:///data/x", "file", "/data/x"),
        ("FILE:///data/x", "file", "/data/x"),
        ("s3://bucket/key", "s3", None),
        ("S3://bucket/key", "s3", None),
        ("gs://bucket/key", "gs", None),
        ("memory://x", "memory", None),
        ("minio+tls://b/k", "minio+tls", None),
        ("/data/a://b", "file", "/data/a://b"),
    ],
    ids=repr,
)
def test_scheme_remote_and_local_path(uri: str, scheme: str, local: str | None) -> None:
    assert scheme_of(uri) == scheme
    assert is_remote_uri(uri) is (local is None)
    assert local_path(uri) == local


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """`root/` with a file, a folder, a link to a file outside, and a link to a folder inside;
    `outside/secret` beside it."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("in")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("out")
    (root / "leak").symlink_to(tmp_path / "outside" / "secret")
    (root / "leakdir").symlink_to(tmp_path / "outside")
    (root / "alias").symlink_to(root / "sub")
    (tmp_path / "root-link").symlink_to(root)
    return root


@pytest.mark.parametrize(
    ("relative", "inside"),
    [
        ("sub/f.txt", "sub/f.txt"),
        ("sub/../sub/f.txt", "sub/f.txt"),
        ("sub/not-yet-there", "sub/not-yet-there"),
        ("alias/f.txt", "sub/f.txt"),
        ("leak", None),
        ("leakdir/secret", None),
        ("../outside/secret", None),
        ("sub/../../outside/secret", None),
    ],
    ids=repr,
)
def test_resolve_inside_follows_dotdot_and_symlinks(
    tree: Path, relative: str, inside: str | None
) -> None:
    found = resolve_inside(tree / relative, [tree])
    assert found == (None if inside is None else (tree / inside).resolve())


def test_the_root_itself_is_inside_unless_strict(tree: Path) -> None:
    assert resolve_inside(tree, [tree]) == tree.resolve()
    assert resolve_inside(str(tree) + "/.", [tree], strict=True) is None
    assert resolve_inside(tree / "sub", [tree], strict=True) == (tree / "sub").resolve()


def test_a_root_reached_through_a_symlink_still_matches(tree: Path) -> None:
    via_link = tree.parent / "root-link"
    assert resolve_inside(tree / "sub" / "f.txt", [via_link]) == (tree / "sub/f.txt").resolve()
    assert resolve_inside(via_link / "sub" / "f.txt", [tree]) == (tree / "sub/f.txt").resolve()


def test_file_uris_remote_and_empty_roots(tree: Path) -> None:
    target = tree / "sub" / "f.txt"
    assert resolve_inside(f"file://{target}", [tree]) == target.resolve()
    assert resolve_inside(target, [f"file://{tree}"]) == target.resolve()
    assert resolve_inside(target, ["", "s3://bucket/root"]) is None
    assert resolve_inside("s3://bucket/root/x", ["s3://bucket/root", tree]) is None
    assert resolve_inside(target, ["s3://bucket/root", "", tree]) == target.resolve()


def test_a_sibling_with_the_root_as_prefix_is_outside(tree: Path) -> None:
    sibling = tree.parent / "root-sibling"
    sibling.mkdir()
    assert resolve_inside(sibling / "x", [tree]) is None
