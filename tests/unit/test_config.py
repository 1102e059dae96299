"""Settings: each `HEADWATER_*` accessor's default, override and bad value, read when called."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater import config
from headwater.errors import ConfigError, UserError

SRC = Path(config.__file__).parent

# (accessor, variable, default, value set, what the accessor gives for it)
SETTINGS: list[tuple[Callable[[], Any], str, Any, str, Any]] = [
    (config.pipeline_root, config.PIPELINE_ROOT_ENV, "HOME/artifacts", "s3://b/p", "s3://b/p"),
    (
        config.metadata_url,
        config.METADATA_URL_ENV,
        "sqlite:///HOME/metadata.db",
        "postgresql+psycopg://h/db",
        "postgresql+psycopg://h/db",
    ),
    (config.run_id, config.RUN_ID_ENV, None, "r-1", "r-1"),
    (
        config.component_image,
        config.COMPONENT_IMAGE_ENV,
        "python:3.11-slim",
        "me/img:1",
        "me/img:1",
    ),
    (config.dask_scheduler, config.DASK_SCHEDULER_ENV, None, " tcp://h:8786 ", "tcp://h:8786"),
    (config.dask_worker, config.DASK_WORKER_ENV, None, "tcp://h:4000", "tcp://h:4000"),
    (config.dask_worker_timeout_s, config.DASK_WORKER_TIMEOUT_ENV, 60.0, "5", 5.0),
    (config.dask_paused_timeout_s, config.DASK_PAUSED_TIMEOUT_ENV, 60.0, "0.5", 0.5),
    (config.dask_workers, config.DASK_WORKERS_ENV, None, "3", 3),
    (config.dask_threads, config.DASK_THREADS_ENV, None, "2", 2),
    (config.dask_memory_limit, config.DASK_MEMORY_LIMIT_ENV, None, "2GB", "2GB"),
    (config.dask_spill_dir, config.DASK_SPILL_DIR_ENV, None, "/tmp/spill", "/tmp/spill"),
    (config.dask_device_memory_limit, config.DASK_DEVICE_MEMORY_LIMIT_ENV, None, "0.8", "0.8"),
    (config.data_memory_limit, config.DATA_MEMORY_LIMIT_ENV, None, "1.5GB", 1_500_000_000),
    (config.data_memory_limit, config.DATA_MEMORY_LIMIT_ENV, None, "2 GiB", 2 * 2**30),
    (config.data_memory_limit, config.DATA_MEMORY_LIMIT_ENV, None, "70000000", 70_000_000),
    (config.data_spill_dir, config.DATA_SPILL_DIR_ENV, None, "/tmp/spill", "/tmp/spill"),
    (config.rmm_pool_size, config.RMM_POOL_SIZE_ENV, None, "8GB", "8GB"),
    (config.ddp_start_timeout_s, config.DDP_START_TIMEOUT_ENV, 120.0, "inf", float("inf")),
    (config.s3_connect_timeout_s, config.S3_CONNECT_TIMEOUT_ENV, 10.0, "0.5", 0.5),
    (config.s3_read_timeout_s, config.S3_READ_TIMEOUT_ENV, 30.0, " 4 ", 4.0),
    (config.s3_retries, config.S3_RETRIES_ENV, 2, "0", 0),
    (config.max_tasks, config.MAX_TASKS_ENV, 1_000_000, "5000", 5000),
    (config.token, config.TOKEN_ENV, None, " t0k ", " t0k "),
    (config.serve_config, config.SERVE_CONFIG_ENV, None, "/x/serve.json", "/x/serve.json"),
    (config.serve_changes, config.SERVE_CHANGES_ENV, None, "/x/changes", "/x/changes"),
]
IDS = [name for _, name, *_ in SETTINGS]

# (accessor, variable, a value it refuses, what the message says is valid)
BAD: list[tuple[Callable[[], Any], str, str, str]] = [
    (config.dask_worker_timeout_s, config.DASK_WORKER_TIMEOUT_ENV, "soon", "seconds above 0"),
    (config.dask_paused_timeout_s, config.DASK_PAUSED_TIMEOUT_ENV, "0", "seconds above 0"),
    (config.dask_workers, config.DASK_WORKERS_ENV, "many", "a valid int"),
    (config.dask_workers, config.DASK_WORKERS_ENV, "0", "1 or more"),
    (config.dask_threads, config.DASK_THREADS_ENV, "1.5", "a valid int"),
    (config.ddp_start_timeout_s, config.DDP_START_TIMEOUT_ENV, "-1", "seconds above 0"),
    (config.s3_connect_timeout_s, config.S3_CONNECT_TIMEOUT_ENV, "nan", "seconds above 0"),
    (config.s3_read_timeout_s, config.S3_READ_TIMEOUT_ENV, "inf", "seconds above 0"),
    (config.s3_retries, config.S3_RETRIES_ENV, "-1", "0 or more"),
    (config.max_tasks, config.MAX_TASKS_ENV, "0", "1 or more"),
    (config.max_tasks, config.MAX_TASKS_ENV, "lots", "a valid int"),
    (
        config.data_memory_limit,
        config.DATA_MEMORY_LIMIT_ENV,
        "lots",
        'a size of 64MB or more ("1GB"',
    ),
    (config.data_memory_limit, config.DATA_MEMORY_LIMIT_ENV, "10MB", "a size of 64MB or more"),
]


@pytest.fixture(autouse=True)
def _home(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known HEADWATER_HOME ("HOME"), and every other variable unset."""
    for _, name, *_ in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(config.HOME_ENV, "HOME")


@pytest.mark.parametrize(("accessor", "name", "default", "value", "parsed"), SETTINGS, ids=IDS)
def test_unset_gives_the_default(
    accessor: Callable[[], Any], name: str, default: Any, value: str, parsed: Any
) -> None:
    assert accessor() == default


@pytest.mark.parametrize(("accessor", "name", "default", "value", "parsed"), SETTINGS, ids=IDS)
def test_set_is_read_when_called(
    monkeypatch: pytest.MonkeyPatch,
    accessor: Callable[[], Any],
    name: str,
    default: Any,
    value: str,
    parsed: Any,
) -> None:
    monkeypatch.setenv(name, value)
    assert accessor() == parsed
    monkeypatch.delenv(name)
    assert accessor() == default


def test_home_and_its_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (config.home(), config.runs_dir(), config.envs_dir()) == (
        Path("HOME"),
        Path("HOME/runs"),
        Path("HOME/envs"),
    )
    monkeypatch.delenv(config.HOME_ENV)
    assert config.home() == Path.home() / ".headwater"


@pytest.mark.parametrize(
    "accessor",
    [config.component_image, config.dask_scheduler, config.dask_workers, config.s3_retries],
    ids=["image", "scheduler", "workers", "retries"],
)
def test_blank_is_unset(monkeypatch: pytest.MonkeyPatch, accessor: Callable[[], Any]) -> None:
    default = accessor()
    for _, name, *_ in SETTINGS:
        monkeypatch.setenv(name, "  ")
    assert accessor() == default


def test_the_token_is_given_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # Neither stripped nor "" made None: the callers decide what an empty token means.
    monkeypatch.setenv(config.TOKEN_ENV, "")
    assert config.token() == ""


@pytest.mark.parametrize(
    ("accessor", "name", "value", "valid"),
    BAD,
    ids=[f"{name}={value}" for _, name, value, _ in BAD],
)
def test_a_bad_value_is_one_line_naming_variable_value_and_what_is_valid(
    monkeypatch: pytest.MonkeyPatch, accessor: Callable[[], Any], name: str, value: str, valid: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        accessor()
    message = str(info.value)
    assert message.startswith(f"{name}={value!r} is not ")
    assert valid in message and message.endswith(": fix or unset it")
    assert "\n" not in message
    assert isinstance(info.value, UserError)


def test_the_worker_count_message_is_the_one_compute_always_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(config.DASK_WORKERS_ENV, "many")
    with pytest.raises(ConfigError, match=r"^HEADWATER_DASK_WORKERS='many' is not a valid int"):
        config.dask_workers()


def test_every_variable_in_src_has_a_name_in_config() -> None:
    """No module names a HEADWATER_* variable config does not know (docstrings aside)."""
    known = {v for k, v in vars(config).items() if k.endswith("_ENV") and isinstance(v, str)}
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(re.findall(r"^HEADWATER_[A-Z0-9_]+$", node.value))
    assert found <= known, sorted(found - known)


def test_every_variable_is_in_the_readme_table() -> None:
    readme = (SRC.parents[1] / "README.md").read_text()
    known = {v for k, v in vars(config).items() if k.endswith("_ENV") and isinstance(v, str)}
    missing = [name for name in sorted(known) if f"| `{name}` |" not in readme]
    assert not missing, missing


@pytest.mark.parametrize(
    ("home", "expected"),
    [
        (None, "headwater serve m:1"),
        ("~/.headwater", "headwater serve m:1"),
        ("/data/hw home", "HEADWATER_HOME='/data/hw home' headwater serve m:1"),
    ],
    ids=["unset", "the-default", "elsewhere-quoted"],
)
def test_a_next_step_sets_the_home_only_where_it_is_not_the_default(
    monkeypatch: pytest.MonkeyPatch, home: str | None, expected: str
) -> None:
    if home is None:
        monkeypatch.delenv("HEADWATER_HOME", raising=False)
    else:
        monkeypatch.setenv("HEADWATER_HOME", home)
    assert config.home_command("serve", "m:1") == expected
