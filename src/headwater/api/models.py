"""The model registry: named, versioned models with their stage and the run that made them.

A model version is an artifact URI registered under a name; versions count 1, 2, ... per
name. Each has a stage, `none`, `staging` or `production`: at most one version of a name is
in production (promoting one demotes the one before it to `none`), while any number may be
in staging. A model registered from a pipeline (the `register_model` component) records the
run and execution that produced its artifact, so `headwater lineage URI` leads from the
registry back through the run.

Example::

    import headwater

    model = headwater.register_model("churn", "file:///models/churn.ubj", framework="xgboost")
    headwater.promote_model("churn", model.version, "production")
    print(headwater.get_model("churn").to_json())
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from headwater.api import iso_time
from headwater.api._args import count
from headwater.api._store import MetadataArg, reading, writing
from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.metadata.base import MODEL_STAGES, MetadataStore, ModelRecord, model_stage

__all__ = [
    "MODEL_STAGES",
    "ModelInfo",
    "Promotion",
    "find_model",
    "get_model",
    "list_models",
    "promote_model",
    "register_model",
]

_VERSIONED = re.compile(r"^(?P<name>[^:@/]+):(?P<version>\d+)$")
_STAGED = re.compile(r"^(?P<name>[^:@/]+)@(?P<stage>[A-Za-z]+)$")
_NAME = re.compile(r"^[^:@/\\]+$")


@dataclass(frozen=True)
class ModelInfo:
    """One registered version of a model.

    `run_id` and `execution_id` are the run that registered it and that run's task execution
    that output the artifact; None when it was registered outside a run (or the run was
    deleted). Times are Unix seconds.
    """

    name: str
    version: int
    uri: str
    framework: str
    stage: str
    metrics: dict[str, Any]
    run_id: str | None
    execution_id: int | None
    created_at: float
    stage_changed_at: float

    @classmethod
    def of(cls, record: ModelRecord) -> ModelInfo:
        """The API's view of a store record."""
        return cls(
            name=record.name,
            version=record.version,
            uri=record.uri,
            framework=record.framework,
            stage=record.stage,
            metrics=dict(record.metrics),
            run_id=record.run_id,
            execution_id=record.execution_id,
            created_at=record.created_at,
            stage_changed_at=record.stage_changed_at,
        )

    def to_json(self) -> dict[str, Any]:
        """The model's JSON shape (`models list --json`, `models show --json`)."""
        return {
            "name": self.name,
            "version": self.version,
            "uri": self.uri,
            "framework": self.framework,
            "stage": self.stage,
            "metrics": self.metrics,
            "run_id": self.run_id,
            "execution_id": self.execution_id,
            "created_at": iso_time(self.created_at),
            "stage_changed_at": iso_time(self.stage_changed_at),
        }


@dataclass(frozen=True)
class Promotion:
    """A version moved to a stage, and the versions that moved out of production for it."""

    model: ModelInfo
    demoted: list[ModelInfo]

    def to_json(self) -> dict[str, Any]:
        """`{"model": {...}, "demoted": [{...}, ...]}` (`models promote --json`)."""
        return {"model": self.model.to_json(), "demoted": [m.to_json() for m in self.demoted]}


def register_model(
    name: str,
    uri: str,
    *,
    framework: str = "",
    metrics: dict[str, Any] | None = None,
    stage: str = "none",
    run_id: str | None = None,
    execution_id: int | None = None,
    metadata: MetadataArg = None,
) -> ModelInfo:
    """Register the artifact at `uri` as the next version of the model `name`.

    The version is assigned by the store atomically (concurrent registrations of one name
    get distinct versions). A URI already registered under `name` is not registered again:
    its existing version is returned, unchanged. Creates the store if need be.

    Args:
        name: The model's name.
        uri: The model artifact's URI, as the metadata store records artifacts.
        framework: What reads it ("xgboost", "sklearn", ...); "" if unknown.
        metrics: JSON-able values to keep with the version (AUC, accuracy, ...).
        stage: "none", "staging" or "production" (which demotes the current production
            version to "none").
        run_id: The run that produced the artifact (a unique prefix is enough), if any.
        execution_id: The task execution that output it; by default the run's execution
            with an OUTPUT event to `uri`, found once the run has recorded it.
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        InvalidArgumentError: An empty name or URI, metrics that are not a dict, or a stage
            that does not exist.
        NotFoundError: `run_id` or `execution_id` is not in the store.
        StorageError: The store cannot be opened.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"a model name must be a non-empty string, got {name!r}")
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidArgumentError(f"model {name!r} needs an artifact URI, got {uri!r}")
    if metrics is not None and not isinstance(metrics, dict):
        raise InvalidArgumentError(
            f"metrics of model {name!r} must be a dict of names to values, got {metrics!r}"
        )
    if execution_id is not None:
        count("execution_id", execution_id, minimum=1)
    stage = model_stage(stage)
    with _opened(metadata) as store:
        if run_id is not None:
            run = store.get_run(run_id)
            if run is None:
                raise NotFoundError(
                    f"no run {run_id!r} to register model {name!r} from: pass the id of a "
                    "recorded run (headwater runs list), or no run id"
                )
            run_id = run.run_id
        record, _ = store.register_model(
            ModelRecord(
                name=name,
                uri=uri,
                framework=framework,
                metrics=dict(metrics or {}),
                stage=stage,
                run_id=run_id,
                execution_id=execution_id,
            )
        )
    return ModelInfo.of(record)


def list_models(*, name: str | None = None, metadata: MetadataArg = None) -> list[ModelInfo]:
    """Registered models by name, newest version first. Reads only.

    Args:
        name: Only this model's versions.
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Raises:
        NotFoundError: `name` is given and no model has it (the message lists the names).
        StorageError: The store cannot be opened for reading.
    """
    with reading(metadata) as store:
        found = [] if store is None else store.list_models(name=name)
        if name is not None and not found:
            raise _missing(store, name, None)
    return [ModelInfo.of(m) for m in found]


def get_model(name: str, version: int | None = None, *, metadata: MetadataArg = None) -> ModelInfo:
    """One version of a model: `version`, or the newest when None. Reads only.

    Raises:
        NotFoundError: The name, or that version of it, is not registered (the message
            lists the names or versions there are).
        InvalidArgumentError: `version` is not a positive integer.
        StorageError: The store cannot be opened for reading.
    """
    if version is not None:
        count("model version", version, minimum=1)
    with reading(metadata) as store:
        found = None if store is None else store.get_model(name, version)
        if found is None:
            raise _missing(store, name, version)
    return ModelInfo.of(found)


def is_model_spec(text: str) -> bool:
    """True when `text` has the form of a registered model: `NAME`, `NAME:VERSION` or
    `NAME@STAGE` (no `/`, so no path or URI has it)."""
    return bool(_VERSIONED.match(text) or _STAGED.match(text) or _NAME.match(text))


def model_name(spec: str) -> str:
    """The registry name in `NAME`, `NAME:VERSION` or `NAME@STAGE` (the spec itself when it
    has none of those forms)."""
    text = spec.strip()
    found = _VERSIONED.match(text) or _STAGED.match(text)
    return found["name"] if found else text


def has_model_name(spec: str, *, metadata: MetadataArg = None) -> bool:
    """True if the registry has versions of the name `spec` names. Reads only."""
    with reading(metadata) as store:
        return store is not None and bool(store.list_models(name=model_name(spec)))


def find_model(spec: str, *, metadata: MetadataArg = None) -> ModelInfo:
    """The registered version `spec` names, as `headwater serve` reads it. Reads only.

    `NAME:VERSION` is that version; `NAME@STAGE` the newest version in that stage; `NAME`
    its production version if it has one, else its newest.

    Raises:
        NotFoundError: No such name, version, or version in that stage (the message lists
            what there is).
        InvalidArgumentError: `spec` is none of the three forms, or the stage does not exist.
        StorageError: The store cannot be opened for reading.
    """
    text = spec.strip()
    versioned, staged = _VERSIONED.match(text), _STAGED.match(text)
    if versioned:
        return get_model(versioned["name"], int(versioned["version"]), metadata=metadata)
    if not staged and not _NAME.match(text):
        raise InvalidArgumentError(
            f"{spec!r} is not a model: give NAME, NAME:VERSION or NAME@STAGE"
        )
    name = staged["name"] if staged else text
    found = list_models(name=name, metadata=metadata)
    if staged:
        stage = model_stage(staged["stage"].lower())
        in_stage = [m for m in found if m.stage == stage]
        if not in_stage:
            listing = ", ".join(f"{m.version} ({m.stage})" for m in found[:20])
            raise NotFoundError(
                f"model {name!r} has no version in stage {stage!r} (versions: {listing}); "
                f"promote one with: headwater models promote {name} VERSION --stage {stage}"
            )
        return in_stage[0]
    production = [m for m in found if m.stage == "production"]
    return (production or found)[0]


def promote_model(
    name: str, version: int, stage: str, *, metadata: MetadataArg = None
) -> Promotion:
    """Move a version of a model to `stage` ("none", "staging" or "production").

    Promoting to production demotes the name's production version to "none" in the same
    transaction, so a name never has two production versions; staging is not exclusive.

    Raises:
        NotFoundError: The name, or that version of it, is not registered.
        InvalidArgumentError: The stage does not exist, or `version` is not a positive integer.
        StorageError: The store cannot be opened.
    """
    count("model version", version, minimum=1)
    stage = model_stage(stage)
    with writing(metadata) as store:
        if store is None:
            raise _missing(None, name, version)
        model, demoted = store.promote_model(name, version, stage)
    return Promotion(ModelInfo.of(model), [ModelInfo.of(m) for m in demoted])


def _missing(store: MetadataStore | None, name: str, version: int | None) -> NotFoundError:
    """The error for a name, or a version of it, that is not registered, naming what is."""
    registered = [] if store is None else store.list_models()
    versions = sorted(m.version for m in registered if m.name == name)
    if version is not None and versions:
        shown = ", ".join(str(v) for v in versions[-20:])
        return NotFoundError(
            f"model {name!r} has no version {version} (registered versions: {shown})"
        )
    names = sorted({m.name for m in registered})
    known = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
    return NotFoundError(
        f"no model named {name!r} (registered models: {known}): register it with "
        "headwater.register_model or the register_model component"
    )


@contextmanager
def _opened(metadata: MetadataArg) -> Iterator[MetadataStore]:
    """The store to register in, created and migrated if need be; one passed in is left open."""
    if isinstance(metadata, MetadataStore):
        yield metadata
        return
    from headwater.metadata import open_store

    store = open_store(metadata)
    try:
        yield store
    finally:
        store.close()
