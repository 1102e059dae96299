"""Canary rollout: the weighted, sticky `CanaryPolicy`, `--canary` wiring, and the admin API
(`/admin/models/{name}/traffic`, `/reload`) driven in-process."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from headwater.errors import InvalidArgumentError, UserError
from headwater.serving.app import create_app
from headwater.serving.config import Canary, ServerConfig
from headwater.serving.endpoint import EndpointState
from headwater.serving.errors import InvalidInputError
from headwater.serving.repository import ModelRepository
from headwater.serving.resolve import resolve
from headwater.serving.server import build_repository
from headwater.serving.traffic import CanaryPolicy, bucket_of

from .helpers import client, rows

VERSION = "x-headwater-model-version"
T = "/admin/models/iris/traffic"
BODY = {"instances": rows(2).tolist()}


@pytest.fixture
def two_versions(sklearn_model: Callable[..., str]) -> Callable[..., ModelRepository]:
    """Factory: endpoint 'iris' serving version 1, version 2 loaded as a canary at `percent`."""

    def make(percent: float = 10) -> ModelRepository:
        first = resolve(sklearn_model())
        second = dataclasses.replace(
            resolve(sklearn_model("iris2.joblib")), name="iris", version="2"
        )
        return build_repository(ServerConfig(sources=(first,), canaries=(Canary(second, percent),)))

    return make


def _state(*labels: str, default: str = "1") -> EndpointState:
    return EndpointState(versions=dict.fromkeys(labels), default=default)  # type: ignore[arg-type]


def test_the_canary_gets_its_share_and_a_key_always_lands_on_one_version() -> None:
    policy = CanaryPolicy("2", 25)
    state = _state("1", "2")
    by_key = Counter(policy.choose(state=state, key=f"client-{i}") for i in range(4000))
    assert 0.22 < by_key["2"] / 4000 < 0.28
    assert {policy.choose(state=state, key="client-7") for _ in range(50)} == {
        "2" if bucket_of("client-7") < 2500 else "1"
    }
    keyless = Counter(policy.choose(state=state, key=None) for _ in range(4000))
    assert 0.22 < keyless["2"] / 4000 < 0.28


@pytest.mark.parametrize(
    ("percent", "labels", "expected"),
    [(0, ("1", "2"), {"1"}), (100, ("1", "2"), {"2"}), (50, ("1",), {"1"})],
    ids=["zero", "hundred", "canary-not-loaded"],
)
def test_edges_of_the_split(percent: float, labels: tuple[str, ...], expected: set[str]) -> None:
    policy = CanaryPolicy("2", percent)
    state = _state(*labels)
    assert {policy.choose(state=state, key=str(i)) for i in range(300)} == expected


@pytest.mark.parametrize("percent", [-1, 100.5, "10", True], ids=["neg", "over", "str", "bool"])
def test_a_bad_percent_is_refused(percent: Any) -> None:
    with pytest.raises(InvalidInputError, match="percent"):
        CanaryPolicy("2", percent)


@pytest.mark.anyio
async def test_shift_promote_and_rollback_through_the_admin_api(
    two_versions: Callable[..., ModelRepository],
) -> None:
    app = create_app(two_versions(10))
    async with client(app) as c:
        shown = (await c.get("/admin/models/iris/traffic")).json()
        assert shown == {
            "name": "iris",
            "default": "1",
            "canary": {"version": "2", "percent": 10.0},
            "versions": ["1", "2"],
            "traffic": {"1": 90.0, "2": 10.0},
        }

        async def served(n: int = 120) -> Counter[str]:
            found: Counter[str] = Counter()
            for i in range(n):
                answer = await c.post(
                    "/v1/models/iris:predict", json=BODY, headers={"x-request-id": f"r{i}"}
                )
                assert answer.status_code == 200, answer.text
                found[answer.headers[VERSION]] += 1
            return found

        before = await served()
        assert before["1"] > before["2"] > 0
        sticky = {
            (
                await c.post("/v1/models/iris:predict", json=BODY, headers={"x-request-id": "r3"})
            ).headers[VERSION]
            for _ in range(10)
        }
        assert len(sticky) == 1

        shifted = await c.post(
            "/admin/models/iris/traffic", json={"canary": {"version": "2", "percent": 60}}
        )
        assert shifted.status_code == 200
        assert shifted.json()["traffic"] == {"1": 40.0, "2": 60.0}
        after = await served()
        assert after["2"] > after["1"] > 0

        rolled = await c.post(T, json={"action": "rollback"})
        assert rolled.json()["canary"] is None and rolled.json()["traffic"]["2"] == 0
        assert set(await served(30)) == {"1"}

        await c.post(T, json={"canary": {"version": 2, "percent": 5}})
        promoted = (await c.post(T, json={"action": "promote"})).json()
        assert promoted["default"] == "2" and promoted["traffic"] == {"1": 0.0, "2": 100.0}
        assert set(await served(30)) == {"2"}
        pinned = await c.post("/v2/models/iris/versions/1/infer", json=_v2())
        assert pinned.status_code == 200 and pinned.headers[VERSION] == "1"


def _v2() -> dict[str, Any]:
    x = rows(1)
    return {"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [1, 4],
                        "data": x.reshape(-1).tolist()}]}  # fmt: skip


@pytest.mark.anyio
async def test_reload_swaps_a_fresh_copy_and_the_old_one_unloads(
    two_versions: Callable[..., ModelRepository],
) -> None:
    repository = two_versions(0)
    old = repository.endpoint("iris").state.versions["2"]
    app = create_app(repository)
    async with client(app) as c:
        reloaded = await c.post("/admin/models/iris/reload", json={"version": "2"})
        assert reloaded.status_code == 200, reloaded.text
        assert reloaded.json()["reloaded"] == "2"
        assert reloaded.json()["canary"] == {"version": "2", "percent": 0.0}
        assert old.wait_unloaded(5)
        assert repository.endpoint("iris").state.versions["2"] is not old
        default = await c.post("/admin/models/iris/reload")
        assert default.json()["reloaded"] == "1"
        answer = await c.post("/v1/models/iris:predict", json=BODY)
        assert answer.status_code == 200 and answer.headers[VERSION] == "1"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "body", "status", "said"),
    [  # T: /admin/models/iris/traffic
        ("/admin/models/nope/traffic", {"action": "promote"}, 404, "no model named 'nope'"),
        (T, {"canary": {"version": "9", "percent": 5}}, 404, "'9'"),
        (T, {"canary": {"version": "1", "percent": 5}}, 400, "default"),
        (T, {"canary": {"version": "2", "percent": 150}}, 400, "0 to 100"),
        (T, {"canary": {"version": "2"}}, 400, '"canary" must be'),
        (T, {"action": "explode"}, 400, "unknown action"),
        (T, {"action": "promote", "canary": {}}, 400, "send one of"),
        (T, {}, 400, "send one of"),
        ("/admin/models/iris/reload", {"version": "7"}, 404, "no version '7'"),
        ("/admin/models/iris/reload", {"version": [1]}, 400, "must be a string"),
    ],
    ids=["model", "version", "default", "percent", "shape", "action", "both", "empty",
         "reload-version", "reload-type"],
)  # fmt: skip
async def test_bad_admin_requests_are_json_errors(
    two_versions: Callable[..., ModelRepository],
    path: str,
    body: dict[str, Any],
    status: int,
    said: str,
) -> None:
    app = create_app(two_versions(10))
    async with client(app) as c:
        answer = await c.post(path, json=body)
        assert answer.status_code == status, answer.text
        assert said in answer.json()["error"]
        unchanged = (await c.get("/admin/models/iris/traffic")).json()
        assert unchanged["traffic"] == {"1": 90.0, "2": 10.0}


@pytest.mark.anyio
async def test_no_canary_to_promote_or_roll_back(
    two_versions: Callable[..., ModelRepository],
) -> None:
    app = create_app(two_versions(10))
    async with client(app) as c:
        await c.post(T, json={"action": "rollback"})
        again = await c.post(T, json={"action": "promote"})
        assert again.status_code == 400 and "no canary to promote" in again.json()["error"]


@pytest.mark.anyio
async def test_admin_needs_the_token_and_is_refused_with_several_workers(
    two_versions: Callable[..., ModelRepository],
) -> None:
    change = {"canary": {"version": "2", "percent": 50}}
    app = create_app(two_versions(10), token="s3cret")
    async with client(app) as c:
        assert (await c.post(T, json=change)).status_code == 401
        assert (await c.get("/admin/models/iris/traffic")).status_code == 401
    read_only = create_app(two_versions(10), admin_changes=False)
    async with client(read_only) as c:
        refused = await c.post(T, json=change)
        assert refused.status_code == 409 and "read-only" in refused.json()["error"]
        assert (await c.post("/admin/models/iris/reload")).status_code == 409
        assert (await c.get("/admin/models/iris/traffic")).status_code == 200


def test_a_canary_must_be_a_new_version_of_a_served_model(
    sklearn_model: Callable[..., str],
) -> None:
    first = resolve(sklearn_model())
    stranger = dataclasses.replace(first, name="other", version="2")
    with pytest.raises(UserError, match="not served"):
        build_repository(ServerConfig(sources=(first,), canaries=(Canary(stranger, 10),)))
    registered = dataclasses.replace(first, registered="iris:1")
    with pytest.raises(UserError, match="already serves version 1"):
        build_repository(ServerConfig(sources=(registered,), canaries=(Canary(registered, 10),)))
    from_file = build_repository(ServerConfig(sources=(first,), canaries=(Canary(first, 10),)))
    assert list(from_file.endpoint("iris").state.versions) == ["1", "2"]
    with pytest.raises(UserError, match="twice"):
        build_repository(ServerConfig(sources=(first,), canaries=(Canary(first, 1),) * 2))
    from_file.close()
    config = ServerConfig(sources=(first,), canaries=(Canary(first, 10),), workers=2)
    assert ServerConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("spec", ["churn:2", "churn:2=", "churn:2=x", "=10", "churn:2=101"])
def test_cli_canary_specs_are_checked(spec: str) -> None:
    from headwater.cli.serve import _canary

    with pytest.raises(InvalidArgumentError, match="MODEL=PERCENT"):
        _canary(spec, None)


@pytest.mark.anyio
async def test_a_multi_worker_app_shares_admin_changes_through_its_change_log(
    sklearn_model: Callable[..., str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from headwater.serving.admin import change_log
    from headwater.serving.server import CHANGES_ENV, CONFIG_ENV, app_from_environment

    second = sklearn_model("iris2.joblib")
    config = ServerConfig(sources=(resolve(sklearn_model()),), workers=2)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_json()))
    changes = tmp_path / "admin-changes.jsonl"
    monkeypatch.setenv(CONFIG_ENV, str(path))
    monkeypatch.setenv(CHANGES_ENV, str(changes))
    # Another worker of the same server, as a repository of its own reading the same log.
    other = build_repository(config)
    other_log = change_log(changes, other, writer="other-worker")
    async with client(app_from_environment()) as c:
        loaded = await c.post("/admin/models/iris/load", json={"model": second})
        assert loaded.status_code == 200, loaded.text
        shifted = await c.post(T, json={"canary": {"version": "1", "percent": 30}})
        assert shifted.status_code == 200, shifted.text
        refused = await c.post("/admin/models/iris/unload", json={"version": "9"})
        assert refused.status_code == 404  # refused here: not written for the others
    assert other_log.catch_up() == 2
    state = other.endpoint("iris").state
    assert (list(state.versions), state.default) == (["1", "2"], "2")
    assert isinstance(state.policy, CanaryPolicy) and state.policy.percent == 30
    # A worker started later (or restarted) replays the log before it takes a request.
    late = build_repository(config)
    change_log(changes, late, writer="late-worker").catch_up()
    assert late.endpoint("iris").state.default == "2"
    for repository in (other, late):
        repository.close()
