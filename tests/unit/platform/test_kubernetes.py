"""Tests for kfp-kubernetes settings: parsing real compiled pipelines and planning tasks."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl, kubernetes

from headwater.errors import PlatformError, UserError
from headwater.platform.kubernetes import ExecutorSettings, parse_settings
from headwater.platform.pod import TaskPlatform
from headwater.platform.secrets import CONFIG_MAP, LocalSecretStore
from headwater.spec.ir import PipelineIR, parse_pipeline
from headwater.spec.loader import ir_from_component


@dsl.component(base_image="python:3.11")
def show() -> str:
    return ""


def _ir(pipeline: Any) -> PipelineIR:
    return ir_from_component(pipeline)


def _settings(pipeline: Any, label: str = "exec-show") -> ExecutorSettings:
    return _ir(pipeline).kubernetes[label]


def _plan(
    settings: ExecutorSettings,
    home: Path,
    *,
    parameters: Mapping[str, Any] | None = None,
    names: Mapping[str, str] | None = None,
) -> TaskPlatform:
    """Plan with selectors resolved as constants, or by `names` (by input or producer task)."""

    def resolve(selector: Mapping[str, Any]) -> Any:
        if "runtimeValue" in selector:
            return selector["runtimeValue"]["constant"]
        key = (
            selector.get("componentInputParameter")
            or selector["taskOutputParameter"]["producerTask"]
        )
        if names and key in names:
            return names[key]
        raise UserError(f"input {key!r} was not given")

    return settings.plan(
        task_name="show",
        run_id="run-1",
        task_id=7,
        attempt=1,
        parameters=parameters or {},
        resolve=resolve,
        workdir=home / "runs" / "run-1" / "tasks" / "show",
        home=home,
    )


@dsl.pipeline
def secrets_pipeline(which: str = "db"):
    task = show()
    kubernetes.use_secret_as_env(task, "db", {"password": "PW", "user": "DB_USER"})
    kubernetes.use_secret_as_env(task, which, {"token": "TOKEN"}, optional=True)
    kubernetes.use_secret_as_volume(task, "db", "/etc/db")
    kubernetes.use_config_map_as_env(task, "cfg", {"mode": "MODE"})
    kubernetes.use_config_map_as_volume(task, "absent", "/etc/cfg", optional=True)


def test_secret_and_config_map_settings_become_files_to_read(tmp_path: Path) -> None:
    secrets = LocalSecretStore.for_home(tmp_path)
    secrets.set("db", {"password": b"hunter2", "user": b"bob"})
    LocalSecretStore.for_home(tmp_path, CONFIG_MAP).set("cfg", {"mode": b"fast"})
    plan = _plan(_settings(secrets_pipeline), tmp_path, names={"which": "other"})
    files = {f.env: (f.path, f.optional) for f in plan.env_files}
    assert files == {
        "PW": (str(secrets.root / "db" / "password"), False),
        "DB_USER": (str(secrets.root / "db" / "user"), False),
        "TOKEN": (str(secrets.root / "other" / "token"), True),
        "MODE": (str(tmp_path / "configmaps" / "cfg" / "mode"), False),
    }
    mounts = {m.target: (m.source, m.read_only) for m in plan.mounts}
    assert mounts == {"/etc/db": (str(secrets.root / "db"), True), "/etc/cfg": ("", True)}
    assert plan.warnings == ()
    payload = repr(plan.to_payload()) + repr(plan.cache_material())
    assert "hunter2" not in payload and "bob" not in payload  # values never leave the store


def test_a_missing_required_secret_fails_the_plan_naming_it_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(PlatformError) as info:
        _plan(_settings(secrets_pipeline), tmp_path, names={"which": "other"})
    message = str(info.value)
    assert "secret 'db'" in message and "$PW" in message
    assert "headwater secrets set db password=VALUE" in message


def test_a_missing_key_names_the_keys_there_are(tmp_path: Path) -> None:
    LocalSecretStore.for_home(tmp_path).set("db", {"password": b"x"})
    with pytest.raises(PlatformError, match=r"has no key 'user' \(for \$DB_USER; its keys: pass"):
        _plan(_settings(secrets_pipeline), tmp_path, names={"which": "other"})


def test_a_missing_config_map_says_to_use_config_map(tmp_path: Path) -> None:
    LocalSecretStore.for_home(tmp_path).set("db", {"password": b"x", "user": b"y"})
    with pytest.raises(PlatformError, match="headwater secrets set --config-map cfg mode="):
        _plan(_settings(secrets_pipeline), tmp_path, names={"which": "other"})


def test_an_unresolvable_secret_name_is_a_platform_error(tmp_path: Path) -> None:
    LocalSecretStore.for_home(tmp_path).set("db", {"password": b"x", "user": b"y"})
    with pytest.raises(PlatformError, match="cannot tell which secret to use: input 'which'"):
        _plan(_settings(secrets_pipeline), tmp_path)


def test_cache_material_changes_with_a_secret_value_not_with_the_run(tmp_path: Path) -> None:
    secrets = LocalSecretStore.for_home(tmp_path)
    secrets.set("db", {"password": b"a", "user": b"b"})
    LocalSecretStore.for_home(tmp_path, CONFIG_MAP).set("cfg", {"mode": b"fast"})
    settings = _settings(secrets_pipeline)
    first = _plan(settings, tmp_path, names={"which": "other"}).cache_material()
    again = settings.plan(
        task_name="show",
        run_id="another-run",
        task_id=3,
        attempt=2,
        parameters={},
        resolve=lambda s: s.get("runtimeValue", {}).get("constant", "other"),
        workdir=tmp_path,
        home=tmp_path,
    )
    assert again.cache_material() == first
    secrets.set("db", {"password": b"changed"})
    assert _plan(settings, tmp_path, names={"which": "other"}).cache_material() != first


@dsl.pipeline
def metadata_pipeline():
    task = show()
    kubernetes.add_pod_label(task, "team", "ml")
    kubernetes.add_pod_annotation(task, "note", "hello")
    for name, path in [
        ("POD", "metadata.name"),
        ("NS", "metadata.namespace"),
        ("UID", "metadata.uid"),
        ("TEAM", "metadata.labels['team']"),
        ("NONE", "metadata.labels['missing']"),
        ("NOTE", "metadata.annotations['note']"),
        ("RUN", "metadata.labels['pipeline/runid']"),
        ("SA", "spec.serviceAccountName"),
        ("IP", "status.podIP"),
    ]:
        kubernetes.use_field_path_as_env(task, name, path)


def test_field_paths_come_from_the_run_the_task_and_its_labels(tmp_path: Path) -> None:
    plan = _plan(_settings(metadata_pipeline), tmp_path)
    env = dict(plan.env)
    assert env["POD"] == "run-1-7"
    assert env["NS"] == "default"
    assert env["TEAM"] == "ml" and env["NOTE"] == "hello" and env["NONE"] == ""
    assert env["RUN"] == "run-1"
    assert env["SA"] == "pipeline-runner" and env["IP"] == "127.0.0.1"
    assert plan.pod["labels"]["pipelines.kubeflow.org/v2_component"] == "true"
    other_attempt = _plan(_settings(metadata_pipeline), tmp_path / "x")
    assert other_attempt.env["UID"] == env["UID"]  # the same attempt of the same task


def test_an_unknown_field_path_is_refused_when_the_pipeline_loads() -> None:
    @dsl.pipeline
    def bad():
        kubernetes.use_field_path_as_env(show(), "X", "spec.nope")

    with pytest.raises(PlatformError, match=r"field path 'spec.nope' is not one Kubernetes"):
        _ir(bad)


@dsl.pipeline
def ignored_pipeline():
    task = show()
    kubernetes.add_toleration(task, key="gpu", operator="Exists")
    kubernetes.add_node_selector(task, "disk", "ssd")
    kubernetes.set_image_pull_secrets(task, ["regcred"])
    kubernetes.set_image_pull_policy(task, "Always")
    kubernetes.set_timeout(task, 30)


def test_settings_without_local_meaning_are_named_in_one_warning(tmp_path: Path) -> None:
    plan = _plan(_settings(ignored_pipeline), tmp_path)
    assert plan.warnings == (
        "task 'show': kfp-kubernetes settings with no meaning on one machine are ignored: "
        "image pull policy, image pull secrets, node selector, tolerations",
    )
    assert plan.timeout == 30


@dsl.pipeline
def pvc_pipeline():
    pvc = kubernetes.CreatePVC(pvc_name_suffix="-data", access_modes=["ReadWriteOnce"], size="1Gi")
    task = show()
    kubernetes.mount_pvc(task, pvc.outputs["name"], "/data", sub_path="part")
    kubernetes.empty_dir_mount(task, "scratch", "/scratch", medium="Memory", size_limit="64Mi")
    kubernetes.DeletePVC(pvc_name=pvc.outputs["name"]).after(task)


def test_create_pvc_names_a_fresh_volume_with_the_suffix_and_is_never_cached(
    tmp_path: Path,
) -> None:
    settings = _settings(pvc_pipeline, "exec-createpvc")
    plan = _plan(settings, tmp_path, parameters={"pvc_name_suffix": "-data"})
    assert plan.operation is not None
    assert plan.operation["kind"] == "create" and plan.operation["name"].endswith("-data")
    assert plan.operation["root"] == str(tmp_path / "volumes")
    assert plan.cache_material() != plan.cache_material()
    fixed = _plan(settings, tmp_path, parameters={"pvc_name": "shared"})
    assert fixed.operation is not None and fixed.operation["name"] == "shared"
    with pytest.raises(PlatformError, match="pvc_name or pvc_name_suffix, not both"):
        _plan(settings, tmp_path, parameters={"pvc_name": "a", "pvc_name_suffix": "-b"})


def test_mounting_or_deleting_a_volume_that_does_not_exist_fails_before_start(
    tmp_path: Path,
) -> None:
    names = {"createpvc": "vol-1"}
    with pytest.raises(PlatformError, match=r"volume 'vol-1' \(mounted at /data\) does not exist"):
        _plan(_settings(pvc_pipeline), tmp_path, names=names)
    with pytest.raises(PlatformError, match="cannot delete volume 'vol-1'"):
        _plan(_settings(pvc_pipeline, "exec-deletepvc"), tmp_path, parameters={"pvc_name": "vol-1"})
    (tmp_path / "volumes" / "vol-1").mkdir(parents=True)
    plan = _plan(_settings(pvc_pipeline), tmp_path, names=names)
    mounts = {m.target: m for m in plan.mounts}
    assert mounts["/data"].source == str(tmp_path / "volumes" / "vol-1" / "part")
    assert mounts["/scratch"].source == "" and mounts["/scratch"].size == "64Mi"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"pvcMount": [{"constant": "v", "mountPath": "/"}]}, "must be a path other than '/'"),
        ({"pvcMount": [{"constant": "v", "mountPath": "C:/d"}]}, "without ':'"),
        (
            {"pvcMount": [{"constant": "v", "mountPath": "/d", "subPath": "../up"}]},
            "must be relative, without '..'",
        ),
        (
            {
                "pvcMount": [{"constant": "v", "mountPath": "/d"}],
                "secretAsVolume": [{"secretName": "s", "mountPath": "/d/"}],
            },
            "mount path '/d' is used by more than one volume",
        ),
        ({"secretAsEnv": [{"secretName": "Bad_Name", "keyToEnv": []}]}, "secret name 'Bad_Name'"),
        (
            {
                "secretAsEnv": [
                    {"secretName": "s", "keyToEnv": [{"secretKey": "k", "envVar": "1X"}]}
                ]
            },
            "'1X' is not a valid environment variable name",
        ),
        ({"secretAsEnv": {"secretName": "s"}}, "secretAsEnv should be a list"),
    ],
    ids=["root", "colon", "subpath-up", "repeated", "bad-name", "bad-env", "not-a-list"],
)
def test_malformed_settings_are_refused_at_load(config: dict[str, Any], message: str) -> None:
    platform = {"kubernetes": {"deploymentSpec": {"executors": {"exec-show": config}}}}
    with pytest.raises(PlatformError, match=message):
        parse_settings(platform, {})


def test_the_platform_document_survives_the_round_trip_through_the_store() -> None:
    ir = _ir(secrets_pipeline)
    again = parse_pipeline(dict(ir.raw))  # what `resume` parses from the metadata store
    assert again.kubernetes == ir.kubernetes
    assert "platforms" not in _ir(_plain_pipeline).raw


@dsl.pipeline
def _plain_pipeline():
    show()


def test_a_relative_mount_path_is_under_root_as_the_container_runtime_takes_it() -> None:
    config = {"emptyDirMounts": [{"volumeName": "s", "mountPath": "path/x/"}]}
    platform = {"kubernetes": {"deploymentSpec": {"executors": {"exec-show": config}}}}
    assert parse_settings(platform, {})["exec-show"].volumes[0].mount_path == "/path/x"
