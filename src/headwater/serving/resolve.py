"""MODEL specs -> `ModelSource`s: registry names, artifact URIs, files and handler classes.

A spec is `[ALIAS=]TARGET`; ALIAS names the endpoint. TARGET is, in the order tried:

* an artifact URI with a scheme (`file:///...`, `s3://...`, `gs://...`): downloaded through
  the artifact store into `$HEADWATER_HOME/serving-cache` (reused while the store says the
  objects are unchanged);
* a handler class, `package.module:Class` or `path/to/handler.py:Class`;
* a local file or directory (a Model artifact from `train_xgboost` or `train_lightning`, a
  booster, a pickle, TorchScript), its framework told by `formats.detect_framework`;
* a registered model: `NAME@STAGE` (the newest version in that stage), `NAME:VERSION`, or
  `NAME`: its production version if it has one, else its newest.

Without an alias the endpoint is named after the registry name, the handler class, or the
file (its stem) or directory. Endpoint names go into URLs, so they are letters, digits and
`_.-` only.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.errors import InvalidArgumentError, NotFoundError, UserError
from headwater.serving.formats import detect_framework, framework_name
from headwater.serving.source import ModelSource

if TYPE_CHECKING:
    from headwater.api._store import MetadataArg
    from headwater.api.models import ModelInfo

#: The version label of a model that is not from the registry.
UNVERSIONED = "1"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HANDLER = re.compile(r"^(?P<module>[A-Za-z_][\w.]*|.+\.py):(?P<cls>[A-Za-z_]\w*)$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def parse_spec(spec: str) -> tuple[str | None, str]:
    """`"alias=target"` -> `("alias", "target")`; a spec without an alias -> `(None, spec)`.

    Raises:
        InvalidArgumentError: An empty spec or target, or an alias that cannot be a URL
            segment.
    """
    text = spec.strip()
    alias, sep, target = text.partition("=")
    if not sep or "/" in alias or ":" in alias:
        alias, target = "", text
    if not target:
        raise InvalidArgumentError(f"model spec {spec!r} names no model: give [NAME=]MODEL")
    if alias and not NAME_PATTERN.match(alias):
        raise InvalidArgumentError(
            f"endpoint name {alias!r} in {spec!r} must be letters, digits and '_.-' "
            "(it goes into URLs)"
        )
    return alias or None, target


def resolve(
    spec: str, *, metadata: MetadataArg = None, cache_dir: str | os.PathLike[str] | None = None
) -> ModelSource:
    """The model a MODEL spec names (see the module docstring), ready for a runtime.

    Args:
        spec: `[ALIAS=]TARGET`.
        metadata: The metadata store holding the registry (a store, a SQLAlchemy URL, or
            None for the default).
        cache_dir: Where remote artifacts are downloaded (default
            `$HEADWATER_HOME/serving-cache`).

    Raises:
        UserError: The spec names nothing that exists, nothing servable, or an endpoint name
            that is not URL-safe (the message says which and how to fix it).
    """
    alias, target = parse_spec(spec)
    if _SCHEME.match(target):
        framework, path = _fetch(target, cache_dir)
        return _named(ModelSource(
            alias or _stem(target), UNVERSIONED, framework, path, spec=spec, uri=target
        ))  # fmt: skip
    handler = _HANDLER.match(target)
    if handler and not Path(target).exists():
        name = alias or handler.group("cls")
        return _named(ModelSource(name, UNVERSIONED, "custom", None, handler=target, spec=spec))
    local = Path(target).expanduser()
    if local.exists():
        path = str(local.resolve())
        source = ModelSource(
            alias or _stem(path), UNVERSIONED, detect_framework(local), path, spec=spec
        )
        return _named(source)
    if "/" in target or os.sep in target or Path(target).suffix.lower() in _FILE_SUFFIXES:
        raise UserError(f"model {target!r} does not exist (no such file or directory)")
    info = _registered(target, spec, metadata)
    framework, path = _fetch(info.uri, cache_dir, framework=info.framework)
    return _named(
        ModelSource(
            alias or info.name,
            str(info.version),
            framework,
            path,
            spec=spec,
            uri=info.uri,
            registered=f"{info.name}:{info.version}",
            details={"stage": info.stage, "metrics": info.metrics, "run_id": info.run_id},
        )
    )


def resolve_all(
    specs: Iterable[str],
    *,
    metadata: MetadataArg = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[ModelSource]:
    """`resolve` each spec; two endpoints with one name are an error.

    Raises:
        UserError: As for `resolve`, or a name given twice (use `alias=` to tell them apart).
    """
    sources: list[ModelSource] = []
    for spec in specs:
        source = resolve(spec, metadata=metadata, cache_dir=cache_dir)
        clash = next((s for s in sources if s.name == source.name), None)
        if clash is not None:
            raise InvalidArgumentError(
                f"two models would be served as {source.name!r} ({clash.spec!r} and "
                f"{spec!r}): name one with ALIAS=MODEL"
            )
        sources.append(source)
    if not sources:
        raise InvalidArgumentError("no model to serve: give at least one MODEL")
    return sources


def _registered(target: str, spec: str, metadata: MetadataArg) -> ModelInfo:
    """The registry version `target` names (`NAME`, `NAME:VERSION`, `NAME@STAGE`), as
    `headwater.api.models.find_model` reads it: the one reading of those forms."""
    from headwater.api import models

    try:
        return models.find_model(target, metadata=metadata)
    except NotFoundError as exc:
        if models.has_model_name(target, metadata=metadata):
            raise  # the name is registered: the version or stage is what is missing
        raise NotFoundError(f"{spec!r} is neither a file nor a registered model: {exc}") from exc


def _fetch(
    uri: str, cache_dir: str | os.PathLike[str] | None, *, framework: str = ""
) -> tuple[str, str]:
    """The framework and local path of the artifact at `uri`, downloaded if it is remote."""
    from headwater import config
    from headwater.artifacts import store_for
    from headwater.paths import is_remote_uri, local_path

    if not is_remote_uri(uri):
        path = Path(local_path(uri) or uri).expanduser()
        if not path.exists():
            raise UserError(f"the model artifact {uri!r} does not exist")
        return framework_name(framework) or detect_framework(path), str(path.resolve())
    cache = Path(cache_dir) if cache_dir is not None else config.home() / "serving-cache"
    store = store_for(str(cache))
    signature = store.signature(uri)
    if signature is None:
        raise UserError(f"the model artifact {uri!r} does not exist")
    key = hashlib.blake2b(f"{uri}\0{signature}".encode(), digest_size=10).hexdigest()
    target = cache / key / (_stem(uri, keep_suffix=True) or "model")
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=cache))
        try:
            store.download(uri, str(staging / target.name))
            target.parent.mkdir(exist_ok=True)
            os.replace(staging / target.name, target)
        except OSError as exc:
            if not target.exists():  # another server may have finished the same download
                raise UserError(f"cannot cache the model {uri!r} in {str(cache)!r}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return framework_name(framework) or detect_framework(target), str(target)


def _stem(where: str, *, keep_suffix: bool = False) -> str:
    """The last segment of a path or URI, without its extension unless asked."""
    last = where.rstrip("/").rsplit("/", 1)[-1]
    return last if keep_suffix else (Path(last).stem or last)


def _named(source: ModelSource) -> ModelSource:
    if not NAME_PATTERN.match(source.name):
        raise InvalidArgumentError(
            f"{source.spec!r} would be served as {source.name!r}, which cannot be a URL "
            f"segment: name the endpoint with ALIAS={source.spec}"
        )
    return source


_FILE_SUFFIXES = frozenset(
    {".ubj", ".json", ".bst", ".joblib", ".pkl", ".pickle", ".pt", ".pth", ".py"}
)
