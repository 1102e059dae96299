"""Opening fsspec filesystems for artifact roots, and turning their errors into `StorageError`.

fsspec and its backends (s3fs, gcsfs) are imported only inside `open_filesystem`, so importing
this module stays cheap. The S3 endpoint comes from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`,
as for the AWS CLI and MinIO clients.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from headwater.artifacts.remote import S3Limits, waiting
from headwater.errors import HeadwaterError, StorageError

#: scheme -> (module fsspec needs, the headwater extra that installs it)
BACKENDS = {"s3": ("s3fs", "s3"), "gs": ("gcsfs", "gcs")}

# check() must fail in seconds on an unreachable endpoint: one attempt, short timeouts.
CHECK_TIMEOUT_S = 3
CHECK_CONFIG = {
    "connect_timeout": CHECK_TIMEOUT_S,
    "read_timeout": CHECK_TIMEOUT_S,
    "retries": {"total_max_attempts": 1},
}


def s3_endpoint() -> str | None:
    """The S3 endpoint botocore would pick from the environment, None for AWS's own.

    `AWS_ENDPOINT_URL_S3` wins over `AWS_ENDPOINT_URL`; both are off when
    `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is true, as in botocore.
    """
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def missing_backend(root: str, module: str, extra: str) -> str:
    """The message for a root whose backend package `module` is not installed.

    Args:
        root: The artifact root that needs the backend.
        module: The package fsspec needs for the root's scheme (`s3fs`, `gcsfs`).
        extra: The headwater extra that installs it.

    Returns:
        One line naming the root, the package and the `pip install` that fixes it.
    """
    return (
        f"artifact root {root!r} needs the {module!r} package. "
        f"Install it with: pip install 'headwater[{extra}]'"
    )


def require_backend(scheme: str, root: str) -> None:
    """Check, without importing it, that the backend package for `scheme` is installed.

    Raises:
        headwater.errors.StorageError: The backend's package (s3fs, gcsfs) is missing.
    """
    backend = BACKENDS.get(scheme)
    if backend is not None and importlib.util.find_spec(backend[0]) is None:
        raise StorageError(missing_backend(root, *backend))


def open_filesystem(
    scheme: str,
    root: str,
    *,
    endpoint: str | None,
    limits: S3Limits | None,
    **options: Any,
) -> Any:
    """A new fsspec filesystem for `scheme`, never one from fsspec's instance cache.

    Args:
        scheme: `s3`, `gs`, `memory` or `file`.
        root: The artifact root, named in errors.
        endpoint: The S3 endpoint, None for AWS's own (ignored for other schemes).
        limits: The S3 timeouts and retries to give botocore (ignored for other schemes).
        **options: Backend options that override the defaults chosen here.

    Raises:
        headwater.errors.StorageError: The backend's package is not installed.
    """
    import fsspec

    # Our own instance: fsspec's instance cache would hand a store another endpoint's
    # client, and a listings cache would hide what task processes uploaded.
    kwargs: dict[str, Any] = {"skip_instance_cache": True}
    if scheme in BACKENDS:
        kwargs["use_listings_cache"] = False
    if scheme == "s3":
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        if limits is not None:
            kwargs["config_kwargs"] = limits.botocore_config()
    kwargs.update(options)
    try:
        fs = fsspec.filesystem(scheme, **kwargs)
    except ImportError as exc:
        module, extra = BACKENDS.get(scheme, (scheme, "all"))
        raise StorageError(missing_backend(root, module, extra)) from exc
    if scheme == "s3":
        fs.retries = 1  # s3fs's own loop would multiply botocore's attempts
    return fs


def describe_location(scheme: str, endpoint: str | None) -> str:
    """Where a remote root's bytes live, for messages: the endpoint or the service."""
    if scheme == "s3":
        return endpoint or "the default AWS S3 endpoint"
    if scheme == "gs":
        return "Google Cloud Storage"
    return "memory"


@contextlib.contextmanager
def translated_errors(action: str, uri: str, where: str, limits: S3Limits | None) -> Iterator[None]:
    """Turn a backend's error into one `StorageError`, and report a call that waits.

    Args:
        action: What was being done (`upload to`, `download`), for the message.
        uri: The URI it was done to.
        where: The endpoint or service, from `describe_location`.
        limits: The S3 bounds in force, or None where calls are unbounded.

    Raises:
        headwater.errors.StorageError: Anything the backend raised, as one line.
    """
    # Backends raise their own zoo (botocore, aiohttp, google-auth, OSError); a caller
    # sees one StorageError with a one-line reason. A call that waits says so as it goes.
    bound = "" if limits is None else f"gives up after about {limits.bound_s:g} s"
    try:
        with waiting(f"{action} {uri!r} at {where}", bound or "no time limit"):
            yield
    except HeadwaterError:
        raise
    except Exception as exc:
        hint = ""
        if limits is not None and is_timeout(exc):
            hint = f": the endpoint did not answer in time ({limits.describe()})"
        raise StorageError(f"cannot {action} {uri!r} at {where}: {one_line(exc)}{hint}") from exc


@contextlib.contextmanager
def local_errors(action: str, uri: str) -> Iterator[None]:
    """Turn an `OSError` on a local path into a one-line `StorageError`."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"cannot {action} {uri!r}: {one_line(exc)}") from exc


def check_local_root(root: str) -> None:
    """Create `root` if needed and prove it writable with a probe file.

    Raises:
        headwater.errors.StorageError: The directory cannot be created or written.
    """
    try:
        os.makedirs(root, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".headwater-check-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StorageError(
            f"artifact root {root!r} is not a writable directory "
            f"({exc.strerror or exc}): fix its permissions or choose another "
            "--pipeline-root"
        ) from exc


@contextlib.contextmanager
def bucket_errors(bucket: str, where: str, root: str) -> Iterator[None]:
    """Turn an error from probing `bucket` into a `StorageError` that says how to fix it.

    Args:
        bucket: The bucket probed.
        where: The endpoint or service, from `describe_location`.
        root: The artifact root in that bucket.

    Raises:
        headwater.errors.StorageError: A missing bucket, denied access or no answer.
    """
    try:
        yield
    except FileNotFoundError as exc:
        raise StorageError(
            f"bucket {bucket!r} does not exist at {where}: create it or choose another "
            "--pipeline-root"
        ) from exc
    except PermissionError as exc:
        raise StorageError(
            f"access to bucket {bucket!r} at {where} is denied ({one_line(exc)}): "
            "check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY for S3)"
        ) from exc
    except HeadwaterError:
        raise
    except Exception as exc:
        hint = (
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or an AWS profile"
            if type(exc).__name__ == "NoCredentialsError"
            else "check the endpoint (AWS_ENDPOINT_URL) and that the server is running"
        )
        raise StorageError(
            f"cannot reach bucket {bucket!r} at {where} for artifact root {root!r} "
            f"({one_line(exc)}): {hint}"
        ) from exc


def is_timeout(exc: BaseException) -> bool:
    """True for a timeout from any layer (botocore, aiohttp, asyncio, sockets), also as the
    cause of another error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError) or "Timeout" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, cut to 300 characters."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
