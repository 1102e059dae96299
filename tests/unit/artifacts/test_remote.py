"""S3 call limits from the environment, and the progress line of a call that waits."""

from __future__ import annotations

import logging
import time

import pytest

from headwater.artifacts import remote
from headwater.errors import StorageError


def test_defaults_bound_a_call_to_minutes_not_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (remote.CONNECT_TIMEOUT_ENV, remote.READ_TIMEOUT_ENV, remote.RETRIES_ENV):
        monkeypatch.delenv(name, raising=False)
    limits = remote.s3_limits()
    assert limits == remote.S3Limits(connect_timeout=10.0, read_timeout=30.0, retries=2)
    assert limits.bound_s == 120.0
    assert limits.botocore_config() == {
        "connect_timeout": 10.0,
        "read_timeout": 30.0,
        "retries": {"total_max_attempts": 3, "mode": "standard"},
    }


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(remote.CONNECT_TIMEOUT_ENV, "0.5")
    monkeypatch.setenv(remote.READ_TIMEOUT_ENV, " 4 ")
    monkeypatch.setenv(remote.RETRIES_ENV, "0")
    limits = remote.s3_limits()
    assert (limits.connect_timeout, limits.read_timeout, limits.attempts) == (0.5, 4.0, 1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (remote.CONNECT_TIMEOUT_ENV, "soon"),
        (remote.READ_TIMEOUT_ENV, "-3"),
        (remote.READ_TIMEOUT_ENV, "inf"),
        (remote.RETRIES_ENV, "1.5"),
    ],
    ids=["word", "negative", "infinite", "fraction"],
)
def test_a_bad_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(StorageError, match=name) as info:
        remote.s3_limits()
    assert "\n" not in str(info.value)


def test_a_call_that_waits_says_what_it_waits_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(remote, "FIRST_PROGRESS_S", 0.01)
    caplog.set_level(logging.WARNING, "headwater.artifacts")
    with remote.waiting("upload to 's3://b/k' at http://h:1", "gives up after about 8 s"):
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:  # the call "waits"
            time.sleep(0.01)
    [line] = {r.getMessage() for r in caplog.records}
    assert line.startswith("headwater: still waiting for upload to 's3://b/k' at http://h:1 (")
    assert line.endswith("gives up after about 8 s)")


def test_a_quick_call_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "headwater.artifacts")
    with remote.waiting("download 's3://b/k'", "gives up after about 8 s"):
        pass
    assert caplog.records == []
