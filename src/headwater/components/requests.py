"""The engine's side of `register_model` and `deploy_model` in a sandboxed run: `RunRequests`.

A sandboxed task never sees the metadata store nor starts a process that outlives it; the
components ask instead (`registration._ask`), and when the task has succeeded the engine
hands each request here (`engine.requests`). Each is held to the task's own run:

* `register_model` registers only a model the task was given as an input (an artifact of its
  own run's lineage, never a URI it names), with its run;
* `deploy_model` deploys only a version registered by a run of the task's own namespace, in a
  model server that runs in a sandbox of its own, showing it the model's files and nothing
  else (`endpoints.supervisor`).

What each answers sets the task's outputs (the version registered; the URL served).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.errors import PermissionDeniedError, UserError

if TYPE_CHECKING:
    from headwater.sandbox.policy import SandboxPolicy
    from headwater.task import Launch

__all__ = ["RunRequests"]


class RunRequests:
    """Carries out a sandboxed run's requests (an `engine.requests.TaskRequests`).

    Args:
        metadata_url: The run's store, for the model server a deploy starts (its records).
            The server runs in the asking task's sandbox policy (`Launch.sandbox`).
    """

    def __init__(self, metadata_url: str | None = None) -> None:
        self.metadata_url = metadata_url

    def __call__(
        self, request: dict[str, Any], *, launch: Launch, run_id: str, store: Any
    ) -> dict[str, Any]:
        """Carry out `request` of `launch`; the output parameters to set.

        Raises:
            UserError: An unknown request, a model that is not the task's input, a version
                of another namespace, or what registering or deploying refuses.
        """
        kind = request.get("kind")
        if kind == "register_model":
            answer = self._register(request, launch, run_id, store)
        elif kind == "deploy_model":
            answer = self._deploy(request, run_id, store, launch.sandbox)
        else:
            raise UserError(f"a task asked the engine for {kind!r}, which it does not do")
        outputs = request.get("outputs") or {}
        declared = launch.output_types
        return {
            outputs[key]: value
            for key, value in answer.items()
            if key in outputs and outputs[key] in declared
        }

    @staticmethod
    def _register(
        request: dict[str, Any], launch: Launch, run_id: str, store: Any
    ) -> dict[str, Any]:
        from headwater.api.models import register_model
        from headwater.executors.staging import stage_remote

        # The task sees a remote input at a local path (`stage_remote`): either names it.
        local, _, _ = stage_remote(launch)
        given: dict[str, str] = {}
        for slot, spec in (launch.executor_input["inputs"].get("artifacts") or {}).items():
            staged = local["inputs"]["artifacts"][slot]["artifacts"]
            for original, seen in zip(spec["artifacts"], staged, strict=True):
                given[str(original["uri"])] = given[str(seen["uri"])] = str(original["uri"])
        uri = str(request.get("uri") or "")
        name = str(request.get("name") or "")
        _own_name(
            store, run_id, [m.run_id for m in store.list_models(name=name)], f"model {name!r}"
        )
        if uri not in given:
            raise PermissionDeniedError(
                f"register_model may register only a model the task was given as an input; "
                f"{uri!r} is not one of them"
            )
        info = register_model(
            name,
            given[uri],
            framework=str(request.get("framework") or ""),
            metrics=request.get("metrics") or {},
            stage=str(request.get("stage") or "none"),
            run_id=run_id,
            metadata=store,
        )
        return {"name": info.name, "version": info.version}

    def _deploy(
        self, request: dict[str, Any], run_id: str, store: Any, sandbox: SandboxPolicy | None
    ) -> dict[str, Any]:
        from headwater.endpoints import deploy_model
        from headwater.serving.resolve import resolve

        spec = str(request.get("spec") or "")
        source = resolve(spec, metadata=store)
        if not source.registered:
            raise UserError(f"deploy_model deploys a registered model; {spec!r} is not one")
        model = store.get_model(source.registered.partition(":")[0], source.version or None)
        run = store.get_run(run_id)
        made = store.get_run(model.run_id) if model is not None and model.run_id else None
        namespace = run.namespace if run is not None else ""
        if made is None or made.namespace != namespace:
            raise PermissionDeniedError(
                f"deploy_model may deploy only a model registered by a run of namespace "
                f"{namespace!r}; {spec!r} is not"
            )
        endpoint = str(request.get("endpoint") or "") or source.registered.partition(":")[0]
        existing = store.get_endpoint(endpoint)
        if existing is not None:
            _own_name(store, run_id, [existing.run_id], f"endpoint {endpoint!r}")
        settings = dict(request.get("settings") or {})
        done = deploy_model(
            spec,
            name=endpoint,
            run_id=run_id,
            metadata=self.metadata_url,
            sandbox=sandbox,
            **settings,
        )
        served = done.endpoint.models[0]["version"] if done.endpoint.models else ""
        return {"url": done.endpoint.url, "endpoint": done.endpoint.name, "version": str(served)}


def _own_name(store: Any, run_id: str, owners: list[str | None], what: str) -> None:
    """Refuse a registry or endpoint name that runs of another namespace made (or that was
    made outside any run): the registry's names are the machine's, not a namespace's, and a
    new version or a redeploy would change what another team serves.

    Raises:
        PermissionDeniedError: Some record of the name is not this run's namespace's.
    """
    run = store.get_run(run_id)
    namespace = run.namespace if run is not None else ""
    for owner in owners:
        made = store.get_run(owner) if owner else None
        if made is None or made.namespace != namespace:
            raise PermissionDeniedError(
                f"{what} was made outside namespace {namespace!r}: a run of it may not add to "
                "it; choose a name of your own"
            )
