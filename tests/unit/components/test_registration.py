"""The task-side functions of `register_model` and `deploy_model` refuse, in one line, to run
outside a Headwater run or against a store a task cannot reach, and `deploy_model` checks its
version and stage before it starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.components.registration import deploy_in_run, register_in_run
from headwater.errors import InvalidArgumentError, UserError


@pytest.fixture
def in_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path))
    monkeypatch.setenv("HEADWATER_RUN_ID", "r-1")
    monkeypatch.delenv("HEADWATER_METADATA_URL", raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: register_in_run("/m", "churn"), ["register_model", "headwater.register_model()"]),
        (lambda: deploy_in_run("churn"), ["deploy_model", "headwater.deploy_model()"]),
    ],
)
def test_outside_a_run_they_say_how_to_run_them(
    call: object, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEADWATER_RUN_ID", raising=False)
    with pytest.raises(UserError, match="HEADWATER_RUN_ID is not set") as raised:
        call()  # type: ignore[operator]
    assert all(name in str(raised.value) for name in names)


def test_an_in_memory_store_is_refused(in_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_METADATA_URL", "sqlite://")
    for call in (lambda: register_in_run("/m", "churn"), lambda: deploy_in_run("churn")):
        with pytest.raises(UserError, match="is in memory, which a task cannot reach"):
            call()


def test_deploy_checks_version_and_stage_first(in_run: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="model_version or stage, not both"):
        deploy_in_run("churn", version=2, stage="production")
    with pytest.raises(InvalidArgumentError, match="model_version must be 1 or more"):
        deploy_in_run("churn", version=-1)
    with pytest.raises(UserError, match="no model named 'churn'"):
        deploy_in_run("churn", stage="production")
