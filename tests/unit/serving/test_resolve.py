"""MODEL specs: aliases, files told by content, handler classes, artifact URIs and the registry."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.api.models import promote_model, register_model
from headwater.errors import InvalidArgumentError, NotFoundError, UserError
from headwater.serving.resolve import parse_spec, resolve, resolve_all


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("churn", (None, "churn")),
        ("prod=churn@production", ("prod", "churn@production")),
        ("a.b-c_1=/m/model.ubj", ("a.b-c_1", "/m/model.ubj")),
        ("s3://bucket/k=v/model", (None, "s3://bucket/k=v/model")),
        ("pkg.mod:Handler", (None, "pkg.mod:Handler")),
    ],
)
def test_specs_split_into_alias_and_target(spec: str, parsed: tuple[str | None, str]) -> None:
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["", "name=", "bad name=churn", "-x=churn"])
def test_bad_specs_are_named(spec: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_spec(spec)


def test_files_are_told_by_content_then_extension(
    xgboost_model: Callable[..., str],
    sklearn_model: Callable[..., str],
    torch_model: Callable[..., str],
    tmp_path: Path,
) -> None:
    booster_dir = Path(xgboost_model())
    renamed = tmp_path / "booster.bin"
    shutil.copy(booster_dir / "model.ubj", renamed)  # the name says nothing; the bytes do
    torch_dir = Path(torch_model())
    found = {
        spec: (s.name, s.framework, s.version)
        for spec in (
            str(booster_dir),
            str(renamed),
            sklearn_model(),
            str(torch_dir),
            str(torch_dir / "model.pt"),
        )
        for s in [resolve(spec)]
    }
    assert list(found.values()) == [
        ("churn", "xgboost", "1"),
        ("booster", "xgboost", "1"),
        ("iris", "sklearn", "1"),
        ("digits", "pytorch", "1"),
        ("model", "pytorch", "1"),
    ]


def test_files_that_are_no_model_are_refused_by_name(
    torch_model: Callable[..., str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "empty").mkdir()
    cases = {
        str(tmp_path / "notes.txt"): "cannot tell which framework",
        str(tmp_path / "config.json"): "not an XGBoost model",
        str(tmp_path / "empty"): "holds no model Headwater recognises",
        str(Path(torch_model()) / "state_dict.pt"): "not TorchScript",
        str(tmp_path / "missing.ubj"): "does not exist",
        "./nowhere/model": "does not exist",
    }
    for spec, message in cases.items():
        with pytest.raises(UserError, match=message):
            resolve(spec)


def test_handler_classes_by_module_or_file(handler_file: str) -> None:
    by_file = resolve(f"{handler_file}:Lengths")
    assert (by_file.name, by_file.framework, by_file.handler) == (
        "Lengths",
        "custom",
        f"{handler_file}:Lengths",
    )
    by_module = resolve("lengths=headwater.nowhere:Handler")
    assert by_module.framework == "custom" and by_module.name == "lengths"


def test_two_models_under_one_name_are_refused(xgboost_model: Callable[..., str]) -> None:
    path = xgboost_model()
    with pytest.raises(InvalidArgumentError, match="two models would be served as 'churn'"):
        resolve_all([path, path])
    assert [s.name for s in resolve_all([path, f"again={path}"])] == ["churn", "again"]


@pytest.fixture
def registry(tmp_path: Path, xgboost_model: Callable[..., str]) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    for name in ("v1", "v2", "v3"):
        register_model("churn", xgboost_model(name), framework="xgboost", metadata=url)
    promote_model("churn", 2, "production", metadata=url)
    promote_model("churn", 3, "staging", metadata=url)
    yield url


@pytest.mark.parametrize(
    ("spec", "name", "version"),
    [
        ("churn", "churn", "2"),  # production wins over newest
        ("churn:1", "churn", "1"),
        ("churn@staging", "churn", "3"),
        ("churn@none", "churn", "1"),
        ("canary=churn@STAGING", "canary", "3"),
    ],
)
def test_registry_names_versions_and_stages(
    registry: str, spec: str, name: str, version: str
) -> None:
    source = resolve(spec, metadata=registry)
    assert (source.name, source.version, source.framework) == (name, version, "xgboost")
    assert source.registered == f"churn:{version}" and Path(str(source.path)).is_dir()


def test_newest_version_without_a_production_one(
    tmp_path: Path, xgboost_model: Callable[..., str]
) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    register_model("kinds", xgboost_model("a"), metadata=url)
    register_model("kinds", xgboost_model("b"), metadata=url)
    assert resolve("kinds", metadata=url).version == "2"
    with pytest.raises(NotFoundError, match=r"no version in stage 'production'.*models promote"):
        resolve("kinds@production", metadata=url)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("nope", NotFoundError, "neither a file nor a registered model.*registered models: churn"),
        ("churn:9", NotFoundError, "no version 9"),
        ("churn@archived", InvalidArgumentError, "stage 'archived'"),
    ],
)
def test_registry_misses_name_what_there_is(
    registry: str, spec: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        resolve(spec, metadata=registry)


def test_remote_artifacts_are_downloaded_once(
    xgboost_model: Callable[..., str], tmp_path: Path
) -> None:
    import fsspec

    from headwater.artifacts import store_for

    uri = "memory://serving-test/models/churn"
    store_for("memory://serving-test").upload(xgboost_model(), uri)
    try:
        first = resolve(uri, cache_dir=tmp_path / "cache")
        again = resolve(f"remote={uri}", cache_dir=tmp_path / "cache")
    finally:
        fsspec.filesystem("memory").rm("/serving-test", recursive=True)
    assert (first.name, first.framework, first.uri) == ("churn", "xgboost", uri)
    assert first.path == again.path and (Path(str(first.path)) / "model.ubj").is_file()
    assert Path(str(first.path)).is_relative_to(tmp_path / "cache")
    with pytest.raises(UserError, match="does not exist"):
        resolve("memory://serving-test/none", cache_dir=tmp_path / "cache")
