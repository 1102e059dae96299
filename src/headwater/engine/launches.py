"""Building what an executor gets for one attempt of one task: its `Launch`, built once.

A launch is complete when it leaves here: the run's package path comes from the `RunContext`,
and what the scheduler decides later (the cache key, the devices a task is given) is kept by
the engine, not written into the launch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from headwater import config
from headwater.engine.inputs import parameter
from headwater.engine.tree import RunContext, TaskRun
from headwater.spec.ir import PipelineIR
from headwater.spec.placeholders import PlaceholderContext, resolve_value
from headwater.spec.types import protojson
from headwater.task import InImage, Launch, Outputs

#: Task names kept as they are for a directory: KFP's own task-name alphabet (plus the dots of
#: nested pipelines), never `.` or `..`, never two names that differ only in letter case.
_PLAIN = re.compile(r"[a-z0-9][a-z0-9.-]{0,127}")
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def task_dir(name: str) -> str:
    """A readable directory name for the task whose display name is `name`, unique per name.

    A plain name (`train`, `inner.train`) is used as is. Any other name (`make a`, `make_a`,
    `train[3]`, `Train`) becomes its sanitised form plus `_` and a hash of the exact name, so
    two names that sanitise alike (`make a`, `make_a`) never share a directory, and no hashed
    name equals a plain one (plain names have no `_`).
    """
    if _PLAIN.fullmatch(name):
        return name
    readable = _UNSAFE.sub("_", name)[:100].strip("_").lstrip(".")
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{readable}_{digest}"


def build_launch(ir: PipelineIR, context: RunContext, task: TaskRun) -> Launch:
    """The launch of `task`'s next attempt (its inputs are resolved).

    Raises:
        UserError: A placeholder in the container's env or resources does not resolve, or a
            resource quantity is malformed.
    """
    from headwater.engine.resources import resource_request

    iface = task.component.interface
    label = task.component.executor_label or ""
    container = dict(ir.executors[label]["container"])
    where = task_dir(task.name)
    workdir = context.run_dir / "tasks" / where
    root = context.pipeline_root.rstrip("/")
    parts = (ir.name, context.run_id, where)
    uri = context.artifact_uri or (lambda *p: "/".join((root, *p)))
    executor_input: dict[str, Any] = {
        "inputs": {
            "parameterValues": task.parameters,
            "artifacts": {n: {"artifacts": a} for n, a in task.artifacts.items()},
        },
        "outputs": {
            "parameters": {
                n: {"outputFile": str(workdir / "outputs" / n)} for n in iface.output_parameters
            },
            "artifacts": {
                n: {
                    "artifacts": [
                        {
                            "name": n,
                            "type": {
                                "schemaTitle": a.schema_title,
                                "schemaVersion": a.schema_version,
                            },
                            "uri": uri(*parts, n),
                            "metadata": {},
                        }
                    ]
                }
                for n, a in iface.output_artifacts.items()
            },
            "outputFile": str(workdir / "executor_output.json"),
        },
    }
    ctx = context.placeholders(task, executor_input)
    env = {str(e["name"]): str(e.get("value", "")) for e in container.get("env") or []}
    env = {k: str(resolve_value(v, ctx)) for k, v in env.items()} | dict(context.env)
    settings = ir.kubernetes.get(label)
    in_image = _in_image(context, container, settings.raw if settings else None, ctx)
    sandbox = context.sandbox
    limits = (0.0, 0.0)
    if sandbox is not None and in_image is None:  # an image's are `in_image`'s
        from headwater.engine.resources import resource_limits

        limits = resource_limits(container.get("resources") or {}, ctx)
    return Launch(
        task_id=task.id,
        name=task.name,
        component=task.spec.component,
        executor_label=label,
        container=container,
        executor_input=executor_input,
        placeholders=ctx,
        workdir=workdir,
        log_path=workdir / "log.txt",
        env=env,
        resources=resource_request(container.get("resources") or {}, ctx),
        output_types={n: p.type for n, p in iface.output_parameters.items()},
        attempt=task.attempts,
        # An image the engine could not resolve (its workers pull it) has no id to key on:
        # such a task is never served from the cache, nor cached.
        cache_enabled=task.spec.enable_cache and (in_image is None or bool(in_image.digest)),
        cache_key=task.spec.cache_key,
        python_path=context.python_path,
        task_root=uri(*parts),
        log_limit=context.log_limit,
        in_image=in_image,
        sandbox=sandbox,
        limits=limits,
        platform=None
        if settings is None
        else settings.plan(
            task_name=task.name,
            run_id=context.run_id,
            task_id=task.id,
            attempt=task.attempts,
            parameters=task.parameters,
            resolve=lambda selector: parameter(task, selector, context),
            workdir=workdir,
            home=context.platform_home or config.home(),
            in_image=in_image is not None,
        ),
    )


def _in_image(
    context: RunContext,
    container: Mapping[str, Any],
    settings: Mapping[str, Any] | None,
    ctx: PlaceholderContext,
) -> InImage | None:
    """How the task runs in its image, by the run's container policy; None on the host.

    Raises:
        ContainerError: Its image is not there and cannot be pulled.
    """
    policy = context.containers
    if policy is None or not policy.wants_image(dict(container)):
        return None
    from headwater.engine.resources import resource_limits
    from headwater.executors.containers import pull_policy

    found = policy.in_image(dict(container), pull_policy(dict(settings or {})))
    if found is None:
        return None
    cpu, memory = resource_limits(container.get("resources") or {}, ctx)
    return dataclasses.replace(found, cpu_limit=cpu, memory_limit=memory)


def imported(context: RunContext, task: TaskRun, importer: Mapping[str, Any]) -> Outputs | None:
    """The outputs of an importer task: its one artifact, or None when it has no URI."""
    ctx = context.placeholders(task)
    uri_spec = importer.get("artifactUri") or {}
    if "constant" in uri_spec:
        uri = resolve_value(uri_spec["constant"], ctx)
    else:
        uri = task.parameters.get("uri")
    if not uri:
        return None
    type_ = importer.get("typeSchema") or {}
    artifact = {
        "name": "artifact",
        "type": {
            "schemaTitle": type_.get("schemaTitle", "system.Artifact"),
            "schemaVersion": type_.get("schemaVersion", "0.0.1"),
        },
        "uri": str(uri),
        "metadata": resolve_value(protojson(importer.get("metadata") or {}), ctx),
    }
    return Outputs(artifacts={"artifact": [artifact]})
