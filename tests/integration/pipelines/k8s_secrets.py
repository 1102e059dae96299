"""Secrets and config maps from kfp-kubernetes, as environment variables and as files.

Each component reports a short digest of each secret value, never the value, so a test can
check the task saw the right bytes while the value stays out of outputs and the store.
"""

from kfp import dsl, kubernetes


@dsl.component
def from_env() -> str:
    import hashlib
    import os

    digest = hashlib.sha256(os.environ["DB_PASSWORD"].encode()).hexdigest()[:12]
    token = os.environ.get("API_TOKEN", "<unset>")
    return f"{digest}|{token}|{os.environ['MODE']}"


@dsl.component
def from_files() -> str:
    import hashlib
    import os

    with open("/etc/headwater-db/password", "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    with open("/etc/headwater-settings/mode") as fh:
        mode = fh.read()
    optional = sorted(os.listdir("/etc/headwater-optional"))
    return f"{digest}|{','.join(sorted(os.listdir('/etc/headwater-db')))}|{mode}|{optional}"


@dsl.pipeline
def k8s_secrets(token_secret: str = "tokens") -> str:
    env_task = from_env()
    kubernetes.use_secret_as_env(env_task, "db", {"password": "DB_PASSWORD"})
    # The secret's name is a pipeline parameter; optional: a missing one leaves API_TOKEN unset.
    kubernetes.use_secret_as_env(env_task, token_secret, {"token": "API_TOKEN"}, optional=True)
    kubernetes.use_config_map_as_env(env_task, "settings", {"mode": "MODE"})
    files_task = from_files().after(env_task)
    kubernetes.use_secret_as_volume(files_task, "db", "/etc/headwater-db")
    kubernetes.use_config_map_as_volume(files_task, "settings", "/etc/headwater-settings")
    kubernetes.use_secret_as_volume(
        files_task, "never-set", "/etc/headwater-optional", optional=True
    )
    return files_task.output
