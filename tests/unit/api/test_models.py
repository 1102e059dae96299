"""`headwater.register_model`, `list_models`, `get_model`, `promote_model` on a SQLite file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import headwater
from headwater.errors import InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # conftest is not importable by name when several folders have one
    from conftest import Seeded


def test_register_list_get_promote_round_trip(seeded: Callable[..., Seeded]) -> None:
    url = seeded().url
    first = headwater.register_model(
        "churn", "/tmp/root/model", framework="xgboost", metrics={"auc": 0.8}, run_id="ok",
        metadata=url,
    )  # fmt: skip
    assert (first.version, first.run_id, first.stage) == (1, "ok", "none")
    assert first.execution_id is not None  # train, the run's execution that output it
    second = headwater.register_model("churn", "/tmp/root/other", stage="production", metadata=url)
    assert second.version == 2 and second.run_id is None
    assert headwater.get_model("churn", metadata=url) == second
    assert headwater.get_model("churn", 1, metadata=url) == first
    assert [m.version for m in headwater.list_models(metadata=url)] == [2, 1]
    done = headwater.promote_model("churn", 1, "production", metadata=url)
    assert done.model.stage == "production"
    assert [(m.version, m.stage) for m in done.demoted] == [(2, "none")]
    assert done.to_json()["demoted"][0]["version"] == 2


def test_to_json_has_the_documented_fields(seeded: Callable[..., Seeded]) -> None:
    url = seeded().url
    headwater.register_model(
        "m", "/tmp/root/model", metrics={"auc": 0.8}, run_id="ok", metadata=url
    )
    shown = headwater.list_models(metadata=url)[0].to_json()
    documented = {"name", "version", "uri", "framework", "stage", "metrics", "run_id"}
    assert documented <= set(shown)
    assert set(shown) - documented == {"execution_id", "created_at", "stage_changed_at"}
    assert shown["created_at"].endswith("Z") and shown["metrics"] == {"auc": 0.8}


def test_the_first_registration_creates_the_default_store(home: Path) -> None:
    assert headwater.list_models() == []
    with pytest.raises(NotFoundError, match="no model named 'm' \\(registered models: none\\)"):
        headwater.get_model("m")
    assert not home.exists()  # reading created nothing
    assert headwater.register_model("m", "s3://bucket/m.ubj").version == 1
    assert (home / "metadata.db").is_file()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda u: headwater.register_model("", "/m", metadata=u), InvalidArgumentError, "name"),
        (lambda u: headwater.register_model("m", " ", metadata=u), InvalidArgumentError, "URI"),
        (
            lambda u: headwater.register_model("m", "/m", metrics=[1], metadata=u),  # type: ignore[arg-type]
            InvalidArgumentError,
            "must be a dict",
        ),
        (
            lambda u: headwater.register_model("m", "/m", stage="live", metadata=u),
            InvalidArgumentError,
            "stage 'live' does not exist",
        ),
        (
            lambda u: headwater.register_model("m", "/m", run_id="zzz", metadata=u),
            NotFoundError,
            "no run 'zzz' to register model 'm' from",
        ),
        (lambda u: headwater.get_model("m", 0, metadata=u), InvalidArgumentError, "version"),
        (
            lambda u: headwater.promote_model("m", 1, "production", metadata=u),
            NotFoundError,
            "no model named 'm'",
        ),
        (
            lambda u: headwater.list_models(name="m", metadata=u),
            NotFoundError,
            "no model named 'm'",
        ),
    ],
    ids=["empty-name", "blank-uri", "metrics-list", "stage", "run", "version-0", "promote",
         "list-name"],
)  # fmt: skip
def test_bad_input_is_one_clear_error(
    seeded: Callable[..., Seeded],
    call: Callable[[str], object],
    error: type[Exception],
    message: str,
) -> None:
    url = seeded().url
    with pytest.raises(error, match=message):
        call(url)
    assert headwater.list_models(metadata=url) == []
