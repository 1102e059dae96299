"""Bounds on remote store calls: S3 timeouts and retries, and a progress line while one waits.

Every S3 call, from the engine and from its tasks (which inherit the environment), is bounded
by three settings read when a store first makes its client:

* `HEADWATER_S3_CONNECT_TIMEOUT`: seconds to open a connection (default 10);
* `HEADWATER_S3_READ_TIMEOUT`: seconds to wait for the server's next bytes (default 30);
* `HEADWATER_S3_RETRIES`: attempts after the first, in botocore's "standard" retry mode,
  which retries timeouts, dropped connections and throttling (default 2).

They go to botocore as its `Config` (through s3fs's `config_kwargs`), and s3fs's own retry
loop is turned off, so a stalled endpoint fails one call after about
`(1 + retries) * (connect + read)` seconds, plus botocore's short backoff, instead of the
minutes that s3fs's retries times botocore's add up to. While a call waits longer than a few
seconds, `waiting` logs a line naming the call, the endpoint and the bound (logger
`headwater.artifacts`; with no logging configured Python prints it on stderr, which for a
task is its log).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from headwater import config
from headwater.errors import ConfigError, StorageError

CONNECT_TIMEOUT_ENV = config.S3_CONNECT_TIMEOUT_ENV
READ_TIMEOUT_ENV = config.S3_READ_TIMEOUT_ENV
RETRIES_ENV = config.S3_RETRIES_ENV

#: Seconds a call waits before the first progress line, and between the next ones.
FIRST_PROGRESS_S = 2.0
PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class S3Limits:
    """How long one S3 call may take: per connection, per read, and how often it is tried."""

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retries: int = 2

    @property
    def attempts(self) -> int:
        """Attempts in all: the first and the retries."""
        return 1 + self.retries

    @property
    def bound_s(self) -> float:
        """About the longest one call can wait on an endpoint that never answers."""
        return self.attempts * (self.connect_timeout + self.read_timeout)

    def botocore_config(self) -> dict[str, Any]:
        """The botocore `Config` arguments (s3fs `config_kwargs`) that enforce these limits."""
        return {
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "retries": {"total_max_attempts": self.attempts, "mode": "standard"},
        }

    def describe(self) -> str:
        """The limits and where to change them, for messages."""
        return (
            f"{self.attempts} attempt(s) of at most {self.connect_timeout:g} s to connect and "
            f"{self.read_timeout:g} s per read; set {CONNECT_TIMEOUT_ENV}, {READ_TIMEOUT_ENV} "
            f"or {RETRIES_ENV} to change them"
        )


def s3_limits() -> S3Limits:
    """The limits set in the environment (defaults for those not set).

    Raises:
        StorageError: A setting is not a number, or out of range (timeouts > 0, retries >= 0).
    """
    try:
        return S3Limits(
            connect_timeout=config.s3_connect_timeout_s(),
            read_timeout=config.s3_read_timeout_s(),
            retries=config.s3_retries(),
        )
    except ConfigError as exc:
        # A store that cannot be used as configured, as every other store setting.
        raise StorageError(str(exc)) from exc


@contextlib.contextmanager
def waiting(what: str, bound: str) -> Iterator[None]:
    """Log a progress line if the block runs past `FIRST_PROGRESS_S`, then every
    `PROGRESS_EVERY_S`, naming `what` is being waited on and `bound` (when it gives up)."""
    started = time.monotonic()
    done = threading.Event()

    def report() -> None:
        delay = FIRST_PROGRESS_S
        while not done.wait(delay):
            # Imported here: `logging` costs every `headwater run` a few ms at start-up.
            import logging

            logging.getLogger("headwater.artifacts").warning(
                "headwater: still waiting for %s (%.0f s so far; %s)",
                what,
                time.monotonic() - started,
                bound,
            )
            delay = PROGRESS_EVERY_S

    watcher = threading.Thread(target=report, name="headwater-wait", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
