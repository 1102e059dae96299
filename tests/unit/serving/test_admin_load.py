"""The admin API's load and unload (what `deploy_model` updates a running server with),
driven in-process against real scikit-learn models."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headwater.serving.app import create_app
from headwater.serving.repository import ModelRepository
from headwater.serving.resolve import resolve

from .helpers import client, rows

VERSION = "x-headwater-model-version"
BODY = {"instances": rows(2).tolist()}


@pytest.mark.anyio
async def test_load_swaps_in_a_new_default_version_and_unload_retires_the_old(
    sklearn_model: Callable[..., str],
) -> None:
    repository = ModelRepository.from_sources([resolve(f"iris={sklearn_model()}")])
    second = sklearn_model("iris2.joblib")
    app = create_app(repository)
    async with client(app) as c:
        loaded = await c.post("/admin/models/iris/load", json={"model": second})
        assert loaded.status_code == 200, loaded.text
        # A file has no version of its own: it is numbered after those served.
        assert loaded.json()["loaded"] == "2"
        assert loaded.json()["default"] == "2" and loaded.json()["versions"] == ["1", "2"]
        answer = await c.post("/v1/models/iris:predict", json=BODY)
        assert answer.status_code == 200 and answer.headers[VERSION] == "2"
        pinned = await c.post("/v2/models/iris/versions/1/infer", json={
            "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [2, 4],
                        "data": rows(2).ravel().tolist()}]})  # fmt: skip
        assert pinned.status_code == 200, "the old version serves until it is unloaded"

        unloaded = await c.post("/admin/models/iris/unload", json={"version": "1"})
        assert unloaded.status_code == 200, unloaded.text
        assert unloaded.json()["versions"] == ["2"]
        gone = await c.post("/v2/models/iris/versions/1/infer", json={"inputs": []})
        assert gone.status_code == 404

        only = await c.post("/admin/models/iris/unload", json={"version": "2"})
        assert only.status_code == 400 and "only version" in only.json()["error"]


@pytest.mark.anyio
async def test_a_version_label_is_never_given_to_another_model(
    sklearn_model: Callable[..., str],
) -> None:
    repository = ModelRepository.from_sources([resolve(f"iris={sklearn_model()}")])
    second, third = sklearn_model("iris2.joblib"), sklearn_model("iris3.joblib")
    app = create_app(repository)
    async with client(app) as c:
        assert (await c.post("/admin/models/iris/load", json={"model": second})).json()[
            "loaded"
        ] == "2"
        assert (await c.post("/admin/models/iris/unload", json={"version": "2"})).status_code == 200
        loaded = await c.post("/admin/models/iris/load", json={"model": third})
        assert loaded.status_code == 200, loaded.text
        assert loaded.json()["loaded"] == "3" and loaded.json()["versions"] == ["1", "3"]
        answer = await c.post("/v1/models/iris:predict", json=BODY)
        assert answer.status_code == 200 and answer.headers[VERSION] == "3"
        # Named explicitly, a label that served another model is refused, loaded or not.
        for label in ("2", "1"):
            reused = await c.post(
                "/admin/models/iris/load", json={"model": third, "version": label}
            )
            assert reused.status_code == 400, reused.text
            assert f"version '{label}' of 'iris' has served another model" in reused.json()["error"]
        # The same model again under its own label is a fresh copy of it, not another model.
        again = await c.post("/admin/models/iris/load", json={"model": third, "version": "3"})
        assert again.status_code == 200, again.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "body", "status", "said"),
    [
        ("/admin/models/iris/load", {}, 400, 'send {"model": "MODEL"}'),
        ("/admin/models/iris/load", {"model": "/no/such/file.joblib"}, 400, "does not exist"),
        ("/admin/models/iris/load", {"model": "x", "extra": 1}, 400, 'send {"model"'),
        ("/admin/models/iris/unload", {"version": "9"}, 404, "9"),
        ("/admin/models/iris/unload", {"version": True}, 400, 'send {"version": "V"}'),
        ("/admin/models/nope/unload", {"version": "1"}, 404, "nope"),
    ],
)
async def test_bad_loads_and_unloads_are_protocol_errors(
    sklearn_model: Callable[..., str], path: str, body: dict[str, object], status: int, said: str
) -> None:
    app = create_app(ModelRepository.from_sources([resolve(f"iris={sklearn_model()}")]))
    async with client(app) as c:
        answer = await c.post(path, json=body)
    assert answer.status_code == status, answer.text
    assert said in answer.json()["error"]


@pytest.mark.anyio
async def test_a_read_only_admin_api_refuses_loads(sklearn_model: Callable[..., str]) -> None:
    repository = ModelRepository.from_sources([resolve(f"iris={sklearn_model()}")])
    app = create_app(repository, admin_changes=False)
    async with client(app) as c:
        answer = await c.post("/admin/models/iris/load", json={"model": sklearn_model("b.joblib")})
    assert answer.status_code == 409 and "read-only" in answer.json()["error"]
