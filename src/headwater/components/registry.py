"""`register_model`: a pipeline step that puts a model into the run's model registry.

The task (its work is `headwater.components.registration.register_in_run`) registers its
input Model's URI under a name in the metadata store of the run it
belongs to, with the run and the execution that produced the model, and outputs the name
and the version it got. It learns its run and store from the environment the engine gives
every task (`HEADWATER_RUN_ID`, `HEADWATER_METADATA_URL`; see `headwater.config`), so it
runs under `headwater run` (local or `--executor dask` with a store the workers can reach)::

    from headwater.components.registry import register_model

    @dsl.pipeline
    def train_and_register():
        trained = train()
        register_model(model=trained.outputs["model"], name="churn", stage="staging")

With the cache on, a rerun whose model is unchanged reuses the registration (no new
version); registering the same URI under the same name again also returns its version.
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from typing import NamedTuple, Optional

from kfp.dsl import Input, Metrics, Model

from headwater.components._component import component


@component(packages_to_install=["headwater"])
def register_model(
    model: Input[Model],
    name: str,
    metrics: dict = {},  # type: ignore[type-arg]  # noqa: B006  (KFP reads a literal default)
    metrics_artifact: Optional[Input[Metrics]] = None,  # noqa: UP045
    stage: str = "none",
    framework: str = "",
) -> NamedTuple("Outputs", name=str, version=int):  # type: ignore[valid-type]
    """Register `model` as the next version of `name` in the run's model registry.

    `metrics` and the scalars logged to `metrics_artifact` (those win) are kept with the
    version; `stage` "production" demotes the name's production version to "none".
    `framework` defaults to the model's own `framework` metadata.
    """
    from headwater.components.registration import register_in_run

    values = dict(metrics)
    if metrics_artifact is not None:
        values.update(metrics_artifact.metadata)
    registered, version, new = register_in_run(
        model.uri,
        name,
        model_metadata=dict(model.metadata),
        metrics=values,
        stage=stage,
        framework=framework,
    )
    said = "registered" if new else "was already registered as"
    print(f"model {registered!r} {said} version {version} ({model.uri})")
    return (registered, version)
