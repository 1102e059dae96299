"""`CanaryPolicy`: a weighted split of an endpoint's traffic between its default version and
a canary, sticky per request key.

    endpoint.load("2", runtime_v2, default=False)       # loaded, serving nothing yet
    endpoint.set_policy(CanaryPolicy("2", 10))          # 10% of requests to version 2
    endpoint.set_policy(CanaryPolicy("2", 25))          # shift more
    promote(endpoint)                                   # version 2 is the default, at 100%
    rollback(endpoint)                                  # or: back to the default alone

A request with an `x-request-id` lands in the same bucket every time (a hash of the key),
so one client sees one version while the split is unchanged; a request without a key is
placed at random. The percentage is KServe's `canaryTrafficPercent`: the share of requests
that go to the canary, the rest to the endpoint's default version.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from headwater.serving.endpoint import (
    DefaultVersionPolicy,
    EndpointState,
    ModelEndpoint,
    TrafficPolicy,
)
from headwater.serving.errors import InvalidInputError, ModelNotFoundError

#: Buckets a request key is hashed into: a percentage has two decimals of resolution.
BUCKETS = 10_000


class CanaryPolicy(TrafficPolicy):
    """`percent`% of requests naming no version go to `canary`, the rest to the default.

    Args:
        canary: The canary's version label (it must be loaded to receive traffic; until it
            is, or once it is unloaded, everything goes to the default).
        percent: From 0 to 100.

    Raises:
        InvalidInputError: `percent` is not a number from 0 to 100.
    """

    def __init__(self, canary: str, percent: float) -> None:
        if isinstance(percent, bool) or not isinstance(percent, int | float):
            raise InvalidInputError(f"canary percent must be a number, got {percent!r}")
        if not 0 <= percent <= 100:
            raise InvalidInputError(f"canary percent must be from 0 to 100, got {percent}")
        self.canary = str(canary)
        self.percent = float(percent)
        self._threshold = round(self.percent * BUCKETS / 100)

    def __repr__(self) -> str:
        return f"CanaryPolicy({self.canary!r}, {self.percent:g})"

    def choose(self, *, state: EndpointState, key: str | None) -> str | None:
        """The canary for a request whose bucket is under the percentage, else the default."""
        if self.canary not in state.versions or self.canary == state.default:
            return state.default if state.default is not None else self.canary
        bucket = bucket_of(key) if key is not None else random.randrange(BUCKETS)
        return self.canary if bucket < self._threshold else state.default


def bucket_of(key: str) -> int:
    """The bucket (0 to `BUCKETS` - 1) that requests with `key` always land in."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def set_canary(endpoint: ModelEndpoint, version: str, percent: float) -> None:
    """Send `percent`% of `endpoint`'s traffic to its loaded `version`.

    Raises:
        ModelNotFoundError: `version` is not loaded.
        InvalidInputError: `version` is the default, or `percent` is out of range.
    """
    state = endpoint.state
    if version not in state.versions:
        loaded = ", ".join(state.versions) or "none"
        raise ModelNotFoundError(
            f"model {endpoint.name!r} has no version {version!r} to send traffic to "
            f"(loaded versions: {loaded}); load it first"
        )
    if version == state.default:
        raise InvalidInputError(
            f"version {version!r} is already model {endpoint.name!r}'s default: a canary must "
            "be another loaded version"
        )
    endpoint.set_policy(CanaryPolicy(version, percent))


def promote(endpoint: ModelEndpoint) -> str:
    """Make the canary the default version, serving all traffic; returns its label.

    The previous default stays loaded (it serves requests naming it) until unloaded.

    Raises:
        InvalidInputError: The endpoint has no canary.
    """
    canary = _canary(endpoint, "promote")
    # The default moves first: a canary policy whose canary is the default sends it
    # everything, so no request sees a moment with the old split reversed.
    endpoint.set_default(canary.canary)
    endpoint.set_policy(DefaultVersionPolicy())
    return canary.canary


def rollback(endpoint: ModelEndpoint) -> str:
    """Send all traffic back to the default version; returns the canary's label.

    Raises:
        InvalidInputError: The endpoint has no canary.
    """
    canary = _canary(endpoint, "roll back")
    endpoint.set_policy(DefaultVersionPolicy())
    return canary.canary


def describe(endpoint: ModelEndpoint) -> dict[str, Any]:
    """The endpoint's versions and traffic split as JSON (the admin API's answer)."""
    state = endpoint.state
    policy = state.policy
    split = {label: 0.0 for label in state.versions}
    canary: dict[str, Any] | None = None
    if isinstance(policy, CanaryPolicy) and policy.canary in state.versions:
        if policy.canary != state.default:
            canary = {"version": policy.canary, "percent": policy.percent}
            split[policy.canary] = policy.percent
            if state.default is not None:
                split[state.default] = 100 - policy.percent
        else:
            split[policy.canary] = 100.0
    elif state.default is not None:
        split[state.default] = 100.0
    return {
        "name": endpoint.name,
        "default": state.default,
        "canary": canary,
        "versions": list(state.versions),
        "traffic": split,
    }


def _canary(endpoint: ModelEndpoint, doing: str) -> CanaryPolicy:
    policy = endpoint.state.policy
    if not isinstance(policy, CanaryPolicy):
        raise InvalidInputError(
            f"model {endpoint.name!r} has no canary to {doing}: set one first with "
            '{"canary": {"version": "V", "percent": P}}'
        )
    return policy


__all__ = ["BUCKETS", "CanaryPolicy", "bucket_of", "describe", "promote", "rollback", "set_canary"]
