"""`SqlMetadataStore`'s model registry: register, list, get and promote model versions."""

from __future__ import annotations

from sqlalchemy import Connection

from headwater.errors import InvalidArgumentError
from headwater.metadata import models
from headwater.metadata.base import ModelRecord, model_stage
from headwater.metadata.schema import MODELS
from headwater.metadata.sql.base import SqlStoreBase


class ModelRegistry(SqlStoreBase):
    """The model registry of `SqlMetadataStore` (the SQL is in `metadata.models`)."""

    def register_model(self, model: ModelRecord) -> tuple[ModelRecord, bool]:
        """Register the next version of `model.name` (see `MetadataStore.register_model`).

        Raises:
            NotFoundError: Its run or execution is not in the store.
            InvalidArgumentError: An empty name or URI, or a stage that does not exist.
        """
        if not model.name or not model.uri:
            raise InvalidArgumentError(
                f"a model needs a name and a URI, got name={model.name!r} uri={model.uri!r}"
            )
        model_stage(model.stage)
        named = [f"run {model.run_id!r}"] if model.run_id is not None else []
        named += [f"execution {model.execution_id}"] if model.execution_id is not None else []
        refers = " or ".join(named)  # "": a unique key still taken is our fault, not the user's
        return self._db.transaction(
            lambda conn: models.register(conn, model), write=True, refers_to=refers
        )

    def list_models(self, *, name: str | None = None) -> list[ModelRecord]:
        """Registered models by name, newest version first; only `name`'s if given."""
        where = [] if name is None else [MODELS.c.name == name]
        return self._db.transaction(lambda conn: models.select_models(conn, *where))

    def get_model(self, name: str, version: int | None = None) -> ModelRecord | None:
        """One version of a model, the newest if `version` is None; None if not registered."""
        where = [MODELS.c.name == name]
        if version is not None:
            where.append(MODELS.c.version == version)

        def read(conn: Connection) -> ModelRecord | None:
            found = models.select_models(conn, *where)
            return found[0] if found else None

        return self._db.transaction(read)

    def promote_model(
        self, name: str, version: int, stage: str
    ) -> tuple[ModelRecord, list[ModelRecord]]:
        """Move a version to `stage`, demoting the production version when promoting to
        production, in one transaction (see `MetadataStore.promote_model`).

        Raises:
            NotFoundError: No such name or version (the message lists what is registered).
            InvalidArgumentError: The stage does not exist.
        """
        model_stage(stage)
        return self._db.transaction(
            lambda conn: models.promote(conn, name, version, stage, self.url), write=True
        )
