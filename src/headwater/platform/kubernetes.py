"""kfp-kubernetes settings: parsed per executor from the platform document, planned per task.

`kfp.kubernetes` (`use_secret_as_env`, `mount_pvc`, `add_pod_label`, ...) writes what a task
asks of a cluster into the compiled pipeline's platform document, under
`platforms.kubernetes.deploymentSpec.executors[LABEL]`; KFP's driver turns that into the
task's pod. Here `parse_settings` reads it once per pipeline, checking what can be checked
before a run starts, and `ExecutorSettings.plan` turns it, for one attempt of one task, into a
`TaskPlatform`: plain environment values, the files that hold secret values, the directories
to mount, and one warning for whatever has no meaning on one machine. A plan holds names and
paths, never a secret's value: the task process reads values itself (`platform.apply`).

What each setting becomes here:

- `use_secret_as_env`, `use_secret_as_volume`: `$HEADWATER_HOME/secrets/NAME/KEY` as an
  environment variable, or the secret's directory mounted read-only at the path.
- `use_config_map_as_env`, `use_config_map_as_volume`: the same from `configmaps/`.
- `use_field_path_as_env`: `metadata.name`/`uid`/`namespace` from the run and task ids,
  `metadata.labels['k']` and `metadata.annotations['k']` from `add_pod_label` and
  `add_pod_annotation` (plus KFP's own), `spec.nodeName` this host, pod and host IPs loopback.
- `CreatePVC`, `mount_pvc`, `DeletePVC`: `$HEADWATER_HOME/volumes/NAME`, mounted at the path.
- `empty_dir_mount`, `add_ephemeral_volume`: a fresh directory per attempt (a tmpfs for
  medium `Memory`), mounted at the path.
- `set_timeout`: the task is killed (SIGALRM) when it runs longer.
- Shared memory: this machine's own `/dev/shm`.
- Everything else (tolerations, node selectors and affinity, image pull secrets and policy,
  security context): one warning line per task, then ignored.

A setting whose name or JSON comes from an input that is null or was not given (an optional
pipeline input left out) is skipped, as KFP's driver skips it (`ErrResolvedParameterNull`):
no variable, no mount, and no warning for an ignored setting that then names nothing. A PVC
mount is the exception, as in KFP: it fails without a volume name.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.errors import PlatformError
from headwater.platform.fields import (
    as_mapping,
    env_name_of,
    list_of,
    missing_message,
    mount_path_of,
    name_selector,
    resolve_name,
    resolves_to_null,
)
from headwater.platform.pod import (
    FIELD_PATHS,
    EnvFile,
    Mount,
    TaskPlatform,
    field_value,
    is_field_path,
    pod_metadata,
)
from headwater.platform.secrets import CONFIG_MAP, SECRET, LocalSecretStore, check_key, check_name

#: Images of KFP's CreatePVC / DeletePVC components: the driver runs them, not a container.
OPERATIONS = {"argostub/createpvc": "create", "argostub/deletepvc": "delete"}
#: Settings that mean nothing without a cluster, by their key in the platform document.
_IGNORED = {
    "nodeSelector": "node selector",
    "nodeAffinity": "node affinity",
    "podAffinity": "pod affinity",
    "tolerations": "tolerations",
    "imagePullSecret": "image pull secrets",
    "imagePullPolicy": "image pull policy",
    "securityContext": "security context",
}
#: Settings emulated here; "enabledSharedMemory" needs nothing: the machine's /dev/shm is there.
_EMULATED = {
    "secretAsEnv",
    "secretAsVolume",
    "configMapAsEnv",
    "configMapAsVolume",
    "pvcMount",
    "emptyDirMounts",
    "genericEphemeralVolume",
    "fieldPathAsEnv",
    "podMetadata",
    "activeDeadlineSeconds",
    "enabledSharedMemory",
}
#: Ignored settings that may come from input parameters: each key's selector field.
_IGNORED_INPUTS = {
    "nodeSelector": "nodeSelectorJson",
    "nodeAffinity": "nodeAffinityJson",
    "tolerations": "tolerationJson",
    "imagePullSecret": "secretNameParameter",
}


@dataclass(frozen=True)
class EnvSource:
    """`use_secret_as_env` / `use_config_map_as_env`: keys of one object as variables."""

    kind: str  # SECRET or CONFIG_MAP
    name: Mapping[str, Any]  # an input selector (constant, pipeline input or task output)
    keys: tuple[tuple[str, str], ...]  # (key, environment variable)
    optional: bool = False


@dataclass(frozen=True)
class VolumeSource:
    """A volume mounted at `mount_path`: a secret, config map, PVC or scratch directory."""

    kind: str  # SECRET, CONFIG_MAP, "volume" or "scratch"
    mount_path: str
    name: Mapping[str, Any] | None = None  # input selector; None for scratch
    optional: bool = False
    sub_path: str = ""
    memory: bool = False  # scratch on a tmpfs (emptyDir medium Memory)
    size: str = ""  # tmpfs size limit
    scratch: str = ""  # the scratch volume's name


@dataclass(frozen=True)
class ExecutorSettings:
    """The kfp-kubernetes settings of one executor, as parsed from the platform document."""

    label: str
    env_sources: tuple[EnvSource, ...] = ()
    volumes: tuple[VolumeSource, ...] = ()
    field_paths: tuple[tuple[str, str], ...] = ()  # (environment variable, field path)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    timeout: int = 0
    ignored: tuple[str, ...] = ()
    # Ignored settings given only by input parameters, with their selectors: left out of the
    # warning when every selector resolves to null.
    ignored_inputs: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...] = ()
    operation: str = ""  # "create" / "delete" for CreatePVC / DeletePVC
    raw: Mapping[str, Any] = field(default_factory=dict)

    def plan(
        self,
        *,
        task_name: str,
        run_id: str,
        task_id: int,
        attempt: int,
        parameters: Mapping[str, Any],
        resolve: Callable[[Mapping[str, Any]], Any],
        workdir: Path,
        home: Path,
        in_image: bool = False,
    ) -> TaskPlatform:
        """Plan one attempt of a task: resolve names, check what must exist, compute values.

        Args:
            task_name: The task's display name (for messages).
            run_id: The run's id; with `task_id` and `attempt` it names the "pod".
            task_id: The task's id within the run.
            attempt: The attempt number, from 1.
            parameters: The task's resolved input parameters (CreatePVC / DeletePVC read them).
            resolve: Resolves an input selector (a secret or PVC name) in the task's DAG.
            workdir: The task's directory (scratch volumes live under it).
            home: `HEADWATER_HOME`.
            in_image: The task runs in its container image, where its image pull policy is
                honoured (not named as ignored).

        Raises:
            PlatformError: A name does not resolve or is invalid, or a required secret,
                config map or volume does not exist (the task must not start).
        """
        if self.operation:
            return _operation(self.operation, parameters, home, task_name)
        stores = {
            SECRET: LocalSecretStore.for_home(home, SECRET),
            CONFIG_MAP: LocalSecretStore.for_home(home, CONFIG_MAP),
        }
        sources: list[tuple[str, str, str, tuple[str, ...] | None]] = []
        volume_names: list[str] = []
        env_files = self._env_files(stores, resolve, sources)
        planned = (
            self._mount(vol, stores, resolve, sources, volume_names, workdir, home)
            for vol in self.volumes
        )
        mounts = [mount for mount in planned if mount is not None]
        pod = pod_metadata(
            self.labels, self.annotations, run_id=run_id, task_id=task_id, attempt=attempt
        )
        warnings: tuple[str, ...] = ()
        ignored = self._ignored(resolve)
        if in_image:
            ignored = [name for name in ignored if name != _IGNORED["imagePullPolicy"]]
        if ignored:
            warnings = (
                f"task {task_name!r}: kfp-kubernetes settings with no meaning on one machine "
                f"are ignored: {', '.join(ignored)}",
            )
        return TaskPlatform(
            env={name: field_value(path, pod) for name, path in self.field_paths},
            env_files=tuple(env_files),
            # Parents before children: a mount point inside another mount is made in it.
            mounts=tuple(sorted(mounts, key=lambda m: m.target.rstrip("/").count("/"))),
            pod=pod,
            timeout=self.timeout,
            warnings=warnings,
            settings=self.raw,
            sources=tuple(sources),
            volumes=tuple(volume_names),
        )

    def _env_files(
        self,
        stores: Mapping[str, LocalSecretStore],
        resolve: Callable[[Mapping[str, Any]], Any],
        sources: list[tuple[str, str, str, tuple[str, ...] | None]],
    ) -> list[EnvFile]:
        """The files holding each variable's value; a required one must exist now."""
        env_files = []
        for src in self.env_sources:
            store = stores[src.kind]
            resolved = resolve_name(src.name, resolve, src.kind)
            if resolved is None:
                continue
            name = check_name(resolved, src.kind)
            sources.append((src.kind, name, str(store.root), tuple(k for k, _ in src.keys)))
            for key, variable in src.keys:
                path = store.path(name) / key
                if not src.optional and not path.is_file():
                    raise PlatformError(missing_message(store, name, key, f"${variable}"))
                what = f"key {key!r} of {src.kind} {name!r}"
                env_files.append(EnvFile(variable, str(path), src.optional, what))
        return env_files

    def _ignored(self, resolve: Callable[[Mapping[str, Any]], Any]) -> list[str]:
        """The ignored settings to name in the warning: not those whose inputs are all null."""
        null = {
            setting
            for setting, selectors in self.ignored_inputs
            if all(resolves_to_null(selector, resolve) for selector in selectors)
        }
        return [setting for setting in self.ignored if setting not in null]

    @staticmethod
    def _mount(
        vol: VolumeSource,
        stores: Mapping[str, LocalSecretStore],
        resolve: Callable[[Mapping[str, Any]], Any],
        sources: list[tuple[str, str, str, tuple[str, ...] | None]],
        volume_names: list[str],
        workdir: Path,
        home: Path,
    ) -> Mount | None:
        """What one volume setting mounts, None when a null input names its secret or config
        map; a required secret or a volume must exist now."""
        if vol.kind in stores:
            store = stores[vol.kind]
            resolved = resolve_name(vol.name or {}, resolve, vol.kind)
            if resolved is None:
                return None
            name = check_name(resolved, vol.kind)
            what = f"{vol.kind} {name!r}"
            if store.exists(name):
                sources.append((vol.kind, name, str(store.root), None))
                return Mount(vol.mount_path, str(store.path(name)), True, what)
            if vol.optional:  # Kubernetes mounts an empty volume for a missing optional one
                return Mount(vol.mount_path, "", True, f"{what} (absent, optional)")
            raise PlatformError(
                missing_message(store, name, None, f"the volume at {vol.mount_path}")
            )
        if vol.kind == "volume":
            selector = vol.name or {}
            resolved = resolve_name(selector, resolve, "volume")
            if resolved is None:  # as KFP's driver, which skips no PVC mount (makeVolumeMountPatch)
                given_by = selector.get("componentInputParameter")
                source = f"input {given_by!r}" if given_by else "a task output"
                raise PlatformError(
                    f"the volume to mount at {vol.mount_path} is named by {source}, which is "
                    "null or was not given: give it a volume name"
                )
            name = check_name(resolved, "volume")
            volume_names.append(name)
            root = volumes_dir(home) / name
            if not root.is_dir():
                raise PlatformError(
                    f"volume {name!r} (mounted at {vol.mount_path}) does not exist in "
                    f"{root.parent}: make it with kubernetes.CreatePVC(pvc_name={name!r}, "
                    f"...) earlier in the pipeline, or mkdir {root}"
                )
            if not vol.sub_path:
                return Mount(vol.mount_path, str(root), what=f"volume {name!r}", owned=True)
            what = f"volume {name!r} (sub path {vol.sub_path!r})"
            return Mount(vol.mount_path, str(root / vol.sub_path), what=what, owned=True)
        what = f"scratch volume {vol.scratch!r}"
        if vol.memory:
            return Mount(vol.mount_path, "", what=what, size=vol.size, owned=True)
        scratch = workdir / "volumes" / vol.scratch
        return Mount(vol.mount_path, str(scratch), what=what, fresh=True, owned=True)


def volumes_dir(home: Path) -> Path:
    """Where volumes (PVCs) live: `$HEADWATER_HOME/volumes`."""
    return Path(home) / "volumes"


def parse_settings(
    platform: Mapping[str, Any], executors: Mapping[str, Mapping[str, Any]]
) -> dict[str, ExecutorSettings]:
    """The kfp-kubernetes settings of each executor label that has any.

    Args:
        platform: The platform document's `platforms` mapping.
        executors: `deploymentSpec.executors` of the PipelineSpec (for CreatePVC/DeletePVC).

    Raises:
        PlatformError: A setting is malformed, or invalid wherever it runs (an unknown field
            path, a relative or repeated mount path, a bad secret name or key).
    """
    result: dict[str, ExecutorSettings] = {}
    for label, executor in executors.items():
        image = str((executor.get("container") or {}).get("image", ""))
        if image in OPERATIONS:
            result[label] = ExecutorSettings(label, operation=OPERATIONS[image])
    kubernetes = as_mapping(platform.get("kubernetes"), "platforms.kubernetes")
    deployment = as_mapping(kubernetes.get("deploymentSpec"), "kubernetes.deploymentSpec")
    where = "kubernetes.deploymentSpec.executors"
    for label, config in as_mapping(deployment.get("executors"), where).items():
        if label not in result:
            result[label] = _executor(label, as_mapping(config, f"{where}.{label}"))
    return result


def _executor(label: str, config: Mapping[str, Any]) -> ExecutorSettings:
    at = f"executor {label!r}"
    env_sources = []
    volumes = []
    for kind, env_key, vol_key, name_key, key_key in (
        (SECRET, "secretAsEnv", "secretAsVolume", "secretName", "secretKey"),
        (CONFIG_MAP, "configMapAsEnv", "configMapAsVolume", "configMapName", "configMapKey"),
    ):
        for item in list_of(config, env_key, at):
            keys = tuple(
                (check_key(str(m.get(key_key, "")), kind), env_name_of(m.get("envVar"), at))
                for m in list_of(item, "keyToEnv", at)
            )
            name = name_selector(item, name_key, kind, at)
            env_sources.append(EnvSource(kind, name, keys, bool(item.get("optional", False))))
        for item in list_of(config, vol_key, at):
            name = name_selector(item, name_key, kind, at)
            path = mount_path_of(item, at)
            volumes.append(VolumeSource(kind, path, name, bool(item.get("optional", False))))
    for item in list_of(config, "pvcMount", at):
        name = name_selector(item, "", "volume", at)
        sub_path = str(item.get("subPath") or "")
        if sub_path.startswith("/") or ".." in sub_path.split("/"):
            raise PlatformError(f"{at}: subPath {sub_path!r} must be relative, without '..'")
        volumes.append(VolumeSource("volume", mount_path_of(item, at), name, sub_path=sub_path))
    for key, memory_key in (("emptyDirMounts", "medium"), ("genericEphemeralVolume", "")):
        for item in list_of(config, key, at):
            medium = str(item.get(memory_key, "")) if memory_key else ""
            volumes.append(
                VolumeSource(
                    "scratch",
                    mount_path_of(item, at),
                    memory=medium == "Memory",
                    size=str(item.get("sizeLimit") or ""),
                    scratch=str(item.get("volumeName") or f"scratch-{len(volumes)}"),
                )
            )
    targets = [v.mount_path for v in volumes]
    repeated = sorted({t for t in targets if targets.count(t) > 1})
    if repeated:
        raise PlatformError(f"{at}: mount path {repeated[0]!r} is used by more than one volume")
    field_paths = []
    for item in list_of(config, "fieldPathAsEnv", at):
        path = str(item.get("fieldPath", ""))
        if not is_field_path(path):
            known = ", ".join(sorted(FIELD_PATHS))
            raise PlatformError(
                f"{at}: field path {path!r} is not one Kubernetes exposes as an environment "
                f"variable ({known}, metadata.labels['KEY'], metadata.annotations['KEY'])"
            )
        field_paths.append((env_name_of(item.get("name"), at), path))
    metadata = as_mapping(config.get("podMetadata"), f"{at}.podMetadata")
    ignored = tuple(sorted(_IGNORED.get(k, k) for k in config if k not in _EMULATED and config[k]))
    ignored_inputs: list[tuple[str, tuple[Mapping[str, Any], ...]]] = []
    for key, param_key in _IGNORED_INPUTS.items():
        value = config.get(key)
        entries = [value] if isinstance(value, Mapping) else value  # nodeSelector is one
        if not entries or not isinstance(entries, list):
            continue
        selectors = [e.get(param_key) if isinstance(e, Mapping) else None for e in entries]
        if all(isinstance(s, Mapping) and s for s in selectors):
            ignored_inputs.append((_IGNORED[key], tuple(s for s in selectors if s)))
    timeout = config.get("activeDeadlineSeconds") or 0
    try:
        timeout = int(timeout)
    except (TypeError, ValueError) as exc:
        raise PlatformError(f"{at}: timeout {timeout!r} is not a number of seconds") from exc
    return ExecutorSettings(
        label,
        env_sources=tuple(env_sources),
        volumes=tuple(volumes),
        field_paths=tuple(field_paths),
        labels={str(k): str(v) for k, v in as_mapping(metadata.get("labels"), at).items()},
        annotations={
            str(k): str(v) for k, v in as_mapping(metadata.get("annotations"), at).items()
        },
        timeout=max(0, timeout),
        ignored=ignored,
        ignored_inputs=tuple(ignored_inputs),
        raw=config,
    )


def _operation(
    kind: str, parameters: Mapping[str, Any], home: Path, task_name: str
) -> TaskPlatform:
    """Plan CreatePVC / DeletePVC, as KFP's driver runs them (k8s.go createPVC, deletePVC)."""
    root = volumes_dir(home)
    if kind == "delete":
        name = check_name(str(parameters.get("pvc_name") or ""), "volume")
        if not (root / name).is_dir():
            raise PlatformError(f"cannot delete volume {name!r}: there is none in {root}")
        return TaskPlatform(operation={"kind": kind, "root": str(root), "name": name})
    fixed = str(parameters.get("pvc_name") or "")
    suffix = str(parameters.get("pvc_name_suffix") or "")
    if fixed and suffix:
        raise PlatformError("CreatePVC takes pvc_name or pvc_name_suffix, not both")
    # As KFP: a given name as is; otherwise a fresh UUID, followed by the suffix if any.
    name = check_name(fixed or f"{uuid.uuid4()}{suffix}", "volume")
    clone = ""
    warnings: tuple[str, ...] = ()
    source = parameters.get("data_source") or {}
    if isinstance(source, Mapping) and source:
        if source.get("kind") == "PersistentVolumeClaim":
            clone = check_name(str(source.get("name") or ""), "volume")
            if not (root / clone).is_dir():
                raise PlatformError(
                    f"CreatePVC data_source: there is no volume {clone!r} in {root}"
                )
        else:
            warnings = (
                f"task {task_name!r}: CreatePVC data_source of kind {source.get('kind')!r} is "
                "ignored here (only PersistentVolumeClaim is copied): the volume starts empty",
            )
    operation = {"kind": kind, "root": str(root), "name": name, "clone": clone}
    return TaskPlatform(operation=operation, warnings=warnings)
