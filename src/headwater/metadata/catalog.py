"""`CatalogStore`: how a metadata store files runs, the part KFP's API brought in: experiments,
named pipelines with their uploaded versions, recurring runs, and the principals who may use
a team server. `MetadataStore` includes it.
"""

from __future__ import annotations

import abc
from typing import Any

from headwater.metadata.records import (
    ExperimentRecord,
    NamespaceRecord,
    PipelineRecord,
    PrincipalRecord,
    RecurringRunRecord,
    VersionRecord,
)

__all__ = ["CatalogStore"]


class CatalogStore(abc.ABC):
    """Experiments, named pipelines and their versions, recurring runs."""

    @abc.abstractmethod
    def create_experiment(self, experiment: ExperimentRecord) -> ExperimentRecord:
        """Record an experiment. Raises ConflictError if its namespace has one of that name."""

    @abc.abstractmethod
    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        """One experiment by id."""

    @abc.abstractmethod
    def experiment_named(self, name: str, namespace: str) -> ExperimentRecord | None:
        """The namespace's experiment `name`."""

    @abc.abstractmethod
    def set_experiment_storage(self, experiment_id: str, storage_state: str) -> None:
        """Archive (with its runs, as KFP does) or unarchive an experiment.

        Raises:
            NotFoundError: No experiment has this id.
        """

    @abc.abstractmethod
    def delete_experiment(self, experiment_id: str) -> None:
        """Delete an experiment; its runs stay, in no experiment. Raises NotFoundError."""

    @abc.abstractmethod
    def experiment_summaries(self, experiment_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Per experiment with runs: `{"runs": count, "last_state", "last_created_at"}`."""

    @abc.abstractmethod
    def create_pipeline(
        self, pipeline: PipelineRecord, version: VersionRecord | None = None
    ) -> PipelineRecord:
        """Record a named pipeline, and its first version with it (one transaction: a
        pipeline never exists without the version it was uploaded with). Raises
        ConflictError if its namespace has one of that name."""

    @abc.abstractmethod
    def get_pipeline(self, pipeline_id: str) -> PipelineRecord | None:
        """One named pipeline by id."""

    @abc.abstractmethod
    def pipeline_named(self, name: str, namespace: str) -> PipelineRecord | None:
        """The namespace's pipeline `name`."""

    @abc.abstractmethod
    def delete_pipeline(self, pipeline_id: str, *, cascade: bool) -> None:
        """Delete a named pipeline and (with `cascade`) its versions (see `delete_version`).

        Raises:
            NotFoundError: No pipeline has this id.
            ConflictError: It has versions and `cascade` is false.
        """

    @abc.abstractmethod
    def create_version(self, version: VersionRecord) -> VersionRecord:
        """Record an uploaded version of a named pipeline; for one of no pipeline
        (`pipeline_id` None), find or add the version no one uploaded of its IR.

        Raises:
            NotFoundError: Its pipeline does not exist.
            ConflictError: The pipeline has a version of that display name.
        """

    @abc.abstractmethod
    def get_version(self, pipeline_version_id: str) -> VersionRecord | None:
        """One pipeline version by id (with its IR)."""

    @abc.abstractmethod
    def latest_version(self, pipeline_id: str) -> VersionRecord | None:
        """The newest version uploaded to a named pipeline."""

    @abc.abstractmethod
    def delete_version(self, pipeline_version_id: str) -> None:
        """Take an uploaded version off its pipeline. Runs (and recurring runs) that point to
        it keep it, as a version no one uploaded; one that nothing points to is deleted.

        Raises:
            NotFoundError: No uploaded version has this id.
        """

    @abc.abstractmethod
    def create_recurring_run(self, recurring: RecurringRunRecord) -> RecurringRunRecord:
        """Record a recurring run."""

    @abc.abstractmethod
    def get_recurring_run(self, recurring_run_id: str) -> RecurringRunRecord | None:
        """One recurring run by id."""

    @abc.abstractmethod
    def update_recurring_run(
        self, recurring_run_id: str, *, next_was: float | None = None, **values: Any
    ) -> bool:
        """Set `values`; with `next_was`, only while `next_fire_at` still is that (so that one
        scheduler fires each time once). True if it changed."""

    @abc.abstractmethod
    def due_recurring_runs(self, now: float) -> list[RecurringRunRecord]:
        """Enabled recurring runs whose next time has come."""

    @abc.abstractmethod
    def delete_recurring_run(self, recurring_run_id: str) -> None:
        """Delete a recurring run; the runs it made stay. Raises NotFoundError."""

    # -- principals (`headwater.access`) ------------------------------------------------------

    @abc.abstractmethod
    def add_principal(self, principal: PrincipalRecord) -> None:
        """Record a token or a proxy user. Raises ConflictError if one of its kind has its name."""

    @abc.abstractmethod
    def principal_by_token(self, token_hash: str) -> PrincipalRecord | None:
        """The token whose secret hashes to `token_hash`, if it exists (is not revoked)."""

    @abc.abstractmethod
    def get_principal(self, kind: str, name: str) -> PrincipalRecord | None:
        """The token or user (`kind`) of that name."""

    @abc.abstractmethod
    def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]:
        """Tokens and users (or those of `kind`), by kind and name."""

    @abc.abstractmethod
    def remove_principal(self, kind: str, name: str) -> None:
        """Delete a token (revoking it) or a user. Raises NotFoundError."""

    @abc.abstractmethod
    def artifact_namespaces(self, artifact_id: int) -> set[str]:
        """The namespaces of the runs that made or read the artifact (who may read it)."""

    @abc.abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace named (by an experiment, a pipeline or a principal), sorted."""

    @abc.abstractmethod
    def has_principals(self) -> bool:
        """True if any token or user is recorded (the server is then multi-user)."""

    # -- namespaces' own settings (`headwater server namespaces`) ------------------------------

    @abc.abstractmethod
    def put_namespace(self, settings: NamespaceRecord) -> None:
        """Record (or replace) a namespace's settings."""

    @abc.abstractmethod
    def get_namespace(self, name: str) -> NamespaceRecord | None:
        """A namespace's settings, if an admin gave it any."""

    @abc.abstractmethod
    def list_namespace_settings(self) -> list[NamespaceRecord]:
        """Every namespace's settings, by name."""

    @abc.abstractmethod
    def remove_namespace(self, name: str) -> None:
        """Forget a namespace's settings (its runs and files stay). Raises NotFoundError."""
