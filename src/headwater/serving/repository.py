"""`ModelRepository`: the endpoints a server serves, by name.

    repository = ModelRepository.from_sources(resolve_all(["churn@production", "iris.joblib"]))
    repository.endpoint("churn").reload()       # swap in a fresh copy, dropping no request
    repository.add_model(other_source)          # a new endpoint, or a new version of one

The set of endpoints is replaced whole when one is added or removed (like each endpoint's
versions), so readers never lock. A version label names one model for the repository's whole
life: once a label of an endpoint has served a model, no other model is loaded under it, even
after it was unloaded (responses name the version that served them, and metrics count by it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace

from headwater.serving.endpoint import ModelEndpoint, ModelVersion
from headwater.serving.errors import InvalidInputError, ModelNotFoundError
from headwater.serving.runtimes import create_runtime
from headwater.serving.source import ModelSource


class ModelRepository:
    """Endpoints by name.

    Args:
        endpoints: The endpoints to start with.
    """

    def __init__(self, endpoints: Iterable[ModelEndpoint] = ()) -> None:
        self._endpoints: Mapping[str, ModelEndpoint] = {e.name: e for e in endpoints}
        self._write = threading.Lock()
        # Endpoint name -> version label -> the model it was given (kept after unloads).
        self._labels: dict[str, dict[str, tuple[str | None, ...]]] = {}

    @classmethod
    def from_sources(cls, sources: Iterable[ModelSource]) -> ModelRepository:
        """A repository serving each source, loaded here (in order; the first error stops).

        Raises:
            UserError: A model failed to load; those loaded before it are unloaded.
        """
        repository = cls()
        try:
            for source in sources:
                repository.add_model(source)
        except BaseException:
            repository.close()
            raise
        return repository

    def __iter__(self) -> Iterator[ModelEndpoint]:
        return iter(self._endpoints.values())

    def __len__(self) -> int:
        return len(self._endpoints)

    def __contains__(self, name: object) -> bool:
        return name in self._endpoints

    @property
    def names(self) -> list[str]:
        """The endpoint names, in the order they were added."""
        return list(self._endpoints)

    @property
    def ready(self) -> bool:
        """True when every endpoint has a version ready (and there is one)."""
        endpoints = list(self._endpoints.values())
        return bool(endpoints) and all(e.ready for e in endpoints)

    def endpoint(self, name: str) -> ModelEndpoint:
        """The endpoint called `name`.

        Raises:
            ModelNotFoundError: No such endpoint (the message lists those there are).
        """
        found = self._endpoints.get(name)
        if found is None:
            served = ", ".join(self._endpoints) or "none"
            raise ModelNotFoundError(f"no model named {name!r} is served (models: {served})")
        return found

    def add(self, endpoint: ModelEndpoint) -> None:
        """Serve `endpoint` (replacing one of the same name, whose versions drain)."""
        with self._write:
            old = self._endpoints.get(endpoint.name)
            self._endpoints = {**self._endpoints, endpoint.name: endpoint}
        if old is not None and old is not endpoint:
            old.close()

    def add_model(
        self, source: ModelSource, *, default: bool = True, numbered: bool = False
    ) -> ModelVersion:
        """Load `source` and serve it as `source.version` of endpoint `source.name`
        (created if need be).

        Args:
            source: The model.
            default: Make it the endpoint's default version.
            numbered: Serve it as the next number instead (after every number the endpoint
                has used, loaded or not), as for a file, which has no version of its own.

        Raises:
            InvalidInputError: `source.version` has served another model before.
            UserError: The model failed to load; nothing changed.
        """
        source, claimed = self._claim(source, numbered=numbered)
        try:
            runtime = create_runtime(source)
            runtime.load()
        except BaseException:
            if claimed:  # the label is free again: nothing was ever served under it
                with self._write:
                    self._labels[source.name].pop(source.version, None)
            raise
        with self._write:
            endpoint = self._endpoints.get(source.name)
            if endpoint is None:
                endpoint = ModelEndpoint(source.name)
                self._endpoints = {**self._endpoints, source.name: endpoint}
        return endpoint.load(source.version, runtime, default=default)

    def _claim(self, source: ModelSource, *, numbered: bool) -> tuple[ModelSource, bool]:
        """`source` with the label it is served as, and whether that label is new.

        Raises:
            InvalidInputError: The label has named another model.
        """
        model = (source.framework, source.registered, source.uri, source.path, source.handler)
        with self._write:
            labels = self._labels.setdefault(source.name, {})
            if numbered:
                endpoint = self._endpoints.get(source.name)
                used = [*labels, *(endpoint.state.versions if endpoint is not None else ())]
                number = 1 + max((int(v) for v in used if v.isdigit()), default=0)
                source = replace(source, version=str(number))
            earlier = labels.get(source.version)
            if earlier is not None and earlier != model:
                shown = earlier[1] or earlier[2] or earlier[3] or earlier[4]
                raise InvalidInputError(
                    f"version {source.version!r} of {source.name!r} has served another model "
                    f"({shown}) in this server's life, and a version label names one model: "
                    "load this one under another version, or without one to number it"
                )
            labels[source.version] = model
            return source, earlier is None

    def remove(self, name: str) -> None:
        """Stop serving the endpoint `name`; its versions unload once idle.

        Raises:
            ModelNotFoundError: No such endpoint.
        """
        with self._write:
            found = self.endpoint(name)
            self._endpoints = {k: v for k, v in self._endpoints.items() if k != name}
        found.close()

    def close(self) -> None:
        """Unload every endpoint's versions (each once its requests are done)."""
        with self._write:
            endpoints = list(self._endpoints.values())
            self._endpoints = {}
        for endpoint in endpoints:
            endpoint.close()
