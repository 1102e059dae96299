"""`packages_to_install`: read from compiled components, checked here, installed on request."""

from pathlib import Path

import pytest
from kfp import dsl

from headwater.errors import MissingPackagesError, UserError
from headwater.executors.packages import (
    _redacted,
    index_options,
    missing,
    pip_environment,
    prepare_packages,
    requirements,
)
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


def _install(**kwargs: object) -> dict[str, object]:
    """A component's container whose command KFP made for `kwargs`."""
    from kfp.dsl import component_factory

    return {"command": component_factory._get_packages_to_install_command(**kwargs)}


@pytest.mark.parametrize(
    "entry",
    ["--extra-index-url http://evil/simple", "--index-url=http://evil", "-i", " --pre", "-e ."],
    ids=["extra-index", "index-equals", "short", "leading-blank", "editable"],
)
def test_an_entry_that_is_a_pip_option_is_refused_naming_it(entry: str) -> None:
    container = _install(packages_to_install=["numpy", entry])
    with pytest.raises(UserError) as info:
        requirements(container)
    message = str(info.value)
    assert f"packages_to_install entry {entry!r} is a pip option" in message
    assert "pip_index_urls" in message and "\n" not in message


def test_an_option_split_over_two_entries_is_refused_too() -> None:
    container = _install(packages_to_install=["--extra-index-url", "http://evil/simple", "x"])
    with pytest.raises(UserError, match="'--extra-index-url' is a pip option"):
        requirements(container)


def test_indexes_come_only_from_pip_index_urls_as_kfp_writes_them() -> None:
    container = _install(
        packages_to_install=["numpy>=1", "it's-a-name", 'pkg; python_version>"3"'],
        pip_index_urls=["http://a/simple", "http://b/simple"],
        pip_trusted_hosts=["a"],
    )
    assert requirements(container) == ["numpy>=1", "it's-a-name", 'pkg; python_version>"3"']
    assert index_options(container) == [
        "--index-url", "http://a/simple", "--extra-index-url", "http://b/simple",
        "--trusted-host", "a",
    ]  # fmt: skip


def test_pip_gets_the_indexes_by_environment_and_logs_no_password() -> None:
    options = ["--index-url", "https://u:pw@a/simple", "--extra-index-url", "http://b/simple",
               "--extra-index-url", "http://c/simple", "--trusted-host", "b"]  # fmt: skip
    assert pip_environment(options) == {
        "PIP_INDEX_URL": "https://u:pw@a/simple",
        "PIP_EXTRA_INDEX_URL": "http://b/simple http://c/simple",
        "PIP_TRUSTED_HOST": "b",
    }
    assert _redacted(options)[1] == "https://***@a/simple"
