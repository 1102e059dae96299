"""`ModelEndpoint`: one served name, its loaded versions, and which version answers.

An endpoint's state (its versions, the default version and the traffic policy) is one
immutable `EndpointState`, replaced whole under a lock and read without one. A request reads
the state once, so it sees either the old or the new model, never a mixture; it then holds
the version it got (`ModelVersion.acquire`) until it has answered. A version taken out of
service (replaced by `load`/`reload`, or `unload`ed) stops taking new requests at once and is
unloaded when its last request is done, so a swap drops no request::

    endpoint = ModelEndpoint("churn")
    endpoint.load("3", runtime_v3)              # serves version 3
    endpoint.load("4", runtime_v4)              # loaded first, then swapped in; 3 drains
    endpoint.reload()                           # a fresh copy of the default version
    endpoint.unload("3")

Which version answers a request that names none is the job of the `TrafficPolicy`: the
default policy serves the default version; a canary policy (weights per version, sticky by
request key) plugs in with `set_policy`, also atomically.
"""

from __future__ import annotations

import abc
import gc
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from headwater.serving.errors import ModelNotFoundError, ModelNotReadyError
from headwater.serving.runtimes.base import ModelRuntime

if TYPE_CHECKING:
    from headwater.serving.predictor import Predictor


class ModelVersion:
    """One loaded version of an endpoint's model, counting the requests it is serving.

    Attributes:
        endpoint: The endpoint's name.
        version: The version label ("3").
        runtime: The loaded model.
        predictor: How requests reach `runtime` (a batcher wraps the default here).
    """

    def __init__(
        self, endpoint: str, version: str, runtime: ModelRuntime, predictor: Predictor
    ) -> None:
        self.endpoint = endpoint
        self.version = version
        self.runtime = runtime
        self.predictor = predictor
        self._lock = threading.Lock()
        self._in_flight = 0
        self._retired = False
        self._unloaded = threading.Event()

    def __repr__(self) -> str:
        return f"ModelVersion({self.endpoint!r}, {self.version!r}, in_flight={self.in_flight})"

    @property
    def in_flight(self) -> int:
        """Requests being served by this version now."""
        return self._in_flight

    @property
    def retired(self) -> bool:
        """True once the version takes no new requests."""
        return self._retired

    def acquire(self) -> bool:
        """Count a request in; False if the version is retired (choose again)."""
        with self._lock:
            if self._retired:
                return False
            self._in_flight += 1
            return True

    def release(self) -> None:
        """Count a request out; the last one out of a retired version unloads it."""
        with self._lock:
            self._in_flight -= 1
            unload = self._retired and self._in_flight == 0
        if unload:
            self._unload()

    def retire(self) -> None:
        """Take no new requests; unload now if idle, else when the last request ends."""
        with self._lock:
            if self._retired:
                return
            self._retired = True
            unload = self._in_flight == 0
        if unload:
            self._unload()

    def wait_unloaded(self, timeout: float | None = None) -> bool:
        """Block until the retired version has been unloaded; False on timeout."""
        return self._unloaded.wait(timeout)

    def _unload(self) -> None:
        try:
            self.runtime.unload()
            _collect_frozen()
        finally:
            self._unloaded.set()


def _collect_frozen() -> None:
    """Collect what an unloaded model leaves in cycles, when the server froze its heap.

    The server moves everything alive at start out of the collector's sight (`gc.freeze`,
    see `headwater.serving.app`), the loaded models included: an unloaded model held in a
    cycle would then never be freed, and each reload would leak one. So unfreeze, collect
    and freeze again (a pause of one full collection, once per unload).
    """
    if gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
        gc.freeze()


class TrafficPolicy(abc.ABC):
    """Chooses the version that answers a request naming none.

    Implementations are immutable values: to change the split, build a new policy and pass
    it to `ModelEndpoint.set_policy`. A canary policy, for example::

        class Canary(TrafficPolicy):
            def __init__(self, stable: str, canary: str, percent: float) -> None: ...

            def choose(self, *, state, key):
                if key is None: key = uuid4().hex
                bucket = int(hashlib.blake2b(key.encode()).hexdigest(), 16) % 100
                return self.canary if bucket < self.percent else self.stable
    """

    @abc.abstractmethod
    def choose(self, *, state: EndpointState, key: str | None) -> str | None:
        """The version label to serve (one of `state.versions`), or None for none ready.

        Args:
            state: The endpoint's versions and default, as the request sees them.
            key: A request key for sticky routing (the `x-request-id` header), if any.
        """


class DefaultVersionPolicy(TrafficPolicy):
    """Every request goes to the endpoint's default version."""

    def choose(self, *, state: EndpointState, key: str | None) -> str | None:
        """The default version."""
        return state.default

    def __repr__(self) -> str:
        return "DefaultVersionPolicy()"


@dataclass(frozen=True)
class EndpointState:
    """An endpoint at one moment: its versions, default version and traffic policy."""

    versions: Mapping[str, ModelVersion] = field(default_factory=dict)
    default: str | None = None
    policy: TrafficPolicy = field(default_factory=DefaultVersionPolicy)


class ModelEndpoint:
    """A served name and its versions; see the module docstring.

    Args:
        name: The endpoint name (the `{name}` in `/v2/models/{name}`).
        predictor: How requests reach a runtime, for versions loaded without their own
            (default: a `ThreadPredictor`, inference on a worker thread).
        runtime_factory: Builds a fresh runtime for `reload` from a loaded one's source
            (default: `headwater.serving.runtimes.create_runtime`).
    """

    def __init__(
        self,
        name: str,
        *,
        predictor: Predictor | None = None,
        runtime_factory: Callable[[Any], ModelRuntime] | None = None,
    ) -> None:
        from headwater.serving.predictor import ThreadPredictor

        self.name = name
        self.predictor: Predictor = predictor or ThreadPredictor()
        self._factory = runtime_factory
        self._state = EndpointState()
        self._write = threading.Lock()

    def __repr__(self) -> str:
        state = self._state
        versions = list(state.versions)
        return f"ModelEndpoint({self.name!r}, versions={versions}, default={state.default!r})"

    @property
    def state(self) -> EndpointState:
        """The endpoint now (one atomic read)."""
        return self._state

    @property
    def ready(self) -> bool:
        """True when a request naming no version would be served."""
        state = self._state
        return state.policy.choose(state=state, key=None) in state.versions

    def load(
        self,
        version: str,
        runtime: ModelRuntime,
        *,
        default: bool = True,
        predictor: Predictor | None = None,
    ) -> ModelVersion:
        """Load `runtime` (unless it is loaded) and serve it as `version`.

        Loading happens before the swap, outside the lock, so requests keep being served by
        what is there. A version already loaded under that label is replaced and drained.

        Args:
            version: The version label.
            runtime: The model; `runtime.load()` is called here if it is not `ready`.
            default: Make it the default version (the first version always is).
            predictor: This version's predictor (default: the endpoint's).

        Raises:
            UserError: The runtime failed to load; nothing changed.
        """
        if not runtime.ready:
            runtime.load()
        added = ModelVersion(self.name, str(version), runtime, predictor or self.predictor)
        with self._write:
            state = self._state
            old = state.versions.get(added.version)
            versions = {**state.versions, added.version: added}
            first = state.default is None or state.default not in versions
            chosen = added.version if default or first else state.default
            self._state = replace(state, versions=versions, default=chosen)
        if old is not None:
            old.retire()
        return added

    def unload(self, version: str) -> None:
        """Stop serving `version`; it unloads once its requests are done.

        Unloading the default version leaves the newest other version (by load order) as the
        default, or the endpoint not ready when it was the last.

        Raises:
            ModelNotFoundError: No such version.
        """
        with self._write:
            state = self._state
            old = state.versions.get(version)
            if old is None:
                raise self._no_version(version, state)
            versions = {k: v for k, v in state.versions.items() if k != version}
            default = state.default
            if default == version:
                default = next(reversed(versions), None) if versions else None
            self._state = replace(state, versions=versions, default=default)
        old.retire()

    def reload(self, version: str | None = None) -> ModelVersion:
        """Load a fresh copy of `version` (default: the default version) from its source and
        swap it in; requests in flight finish on the old copy.

        Raises:
            ModelNotFoundError: No such version.
            ModelNotReadyError: No version to reload.
            UserError: The fresh copy failed to load; the old one keeps serving.
        """
        state = self._state
        label = version if version is not None else state.default
        if label is None:
            raise ModelNotReadyError(f"model {self.name!r} has no version loaded to reload")
        current = state.versions.get(label)
        if current is None:
            raise self._no_version(label, state)
        if self._factory is not None:
            fresh = self._factory(current.runtime.source)
        else:
            from headwater.serving.runtimes import create_runtime

            fresh = create_runtime(current.runtime.source)
        return self.load(label, fresh, default=state.default == label, predictor=current.predictor)

    def set_default(self, version: str) -> None:
        """Make `version` the default (what the default policy serves).

        Raises:
            ModelNotFoundError: No such version.
        """
        with self._write:
            state = self._state
            if version not in state.versions:
                raise self._no_version(version, state)
            self._state = replace(state, default=version)

    def set_policy(self, policy: TrafficPolicy) -> None:
        """Route requests naming no version with `policy` from now on."""
        with self._write:
            self._state = replace(self._state, policy=policy)

    def choose(self, version: str | None = None, *, key: str | None = None) -> ModelVersion:
        """The version to serve a request (`version` if it names one), acquired.

        The caller must `release()` it when the request is done; `serving` does both.

        Raises:
            ModelNotFoundError: The request names a version that is not loaded.
            ModelNotReadyError: No version is loaded (or the policy chose none).
        """
        for _ in range(100):  # a retired version is replaced by then: choose again
            state = self._state
            label = version if version is not None else state.policy.choose(state=state, key=key)
            found = state.versions.get(label) if label is not None else None
            if found is None:
                if version is not None:
                    raise self._no_version(version, state)
                raise ModelNotReadyError(f"model {self.name!r} has no version ready to serve")
            if found.acquire():
                return found
        raise ModelNotReadyError(f"model {self.name!r} is being swapped; try again")

    @asynccontextmanager
    async def serving(
        self, version: str | None = None, *, key: str | None = None
    ) -> AsyncIterator[ModelVersion]:
        """`choose` a version and release it when the block ends."""
        chosen = self.choose(version, key=key)
        try:
            yield chosen
        finally:
            chosen.release()

    def close(self) -> None:
        """Unload every version (each once its requests are done)."""
        with self._write:
            state = self._state
            self._state = replace(state, versions={}, default=None)
        for loaded in state.versions.values():
            loaded.retire()

    def _no_version(self, version: str, state: EndpointState) -> ModelNotFoundError:
        loaded = ", ".join(state.versions) or "none"
        return ModelNotFoundError(
            f"model {self.name!r} has no version {version!r} (loaded versions: {loaded})"
        )


__all__ = [
    "DefaultVersionPolicy",
    "EndpointState",
    "ModelEndpoint",
    "ModelVersion",
    "TrafficPolicy",
]
