"""`packages_to_install`: read from compiled components, checked here, installed on request."""

from pathlib import Path

import pytest
from kfp import dsl

from headwater.errors import MissingPackagesError, UserError
from headwater.executors.packages import missing, prepare_packages, requirements
from headwater.spec.loader import ir_from_component


@dsl.component(
    base_image="python:3.11", packages_to_install=["headwater-no-such-pkg-xyz==1.0", "kfp"]
)
def needs_a_package() -> str:
    return "never runs here"


@dsl.pipeline
def one_task() -> str:
    return needs_a_package().output


def test_requirements_skip_kfp_itself() -> None:
    ir = ir_from_component(one_task)
    (executor,) = ir.executors.values()
    assert requirements(executor["container"]) == ["headwater-no-such-pkg-xyz==1.0"]
    assert missing(["headwater-no-such-pkg-xyz==1.0", "pytest"]) == [
        "headwater-no-such-pkg-xyz==1.0"
    ]


def test_missing_packages_name_the_fix() -> None:
    with pytest.raises(MissingPackagesError, match="--install-packages"):
        prepare_packages(ir_from_component(one_task), install=False)


def test_an_unwritable_home_is_one_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("HEADWATER_HOME", str(blocker / "home"))

    with pytest.raises(UserError) as info:
        prepare_packages(ir_from_component(one_task), install=True)

    message = str(info.value)
    assert str(blocker / "home" / "envs") in message
    assert "HEADWATER_HOME" in message
    assert "\n" not in message
