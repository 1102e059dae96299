"""kfp-kubernetes settings named by optional pipeline inputs, as in KFP's own test pipeline
`critical/missing_kubernetes_optional_inputs`: left out, each setting is skipped."""

# ruff: noqa: UP045 - kfp 2.17.3 rejects `X | None` as an input type
from typing import Any, Dict, List, Optional

from kfp import dsl, kubernetes


@dsl.component
def report() -> str:
    import hashlib
    import os

    password = os.environ.get("PASSWORD")
    digest = hashlib.sha256(password.encode()).hexdigest()[:12] if password else "<unset>"
    seen = [
        sorted(os.listdir(path)) if os.path.isdir(path) else "<absent>"
        for path in ("/mnt/secret", "/mnt/config")
    ]
    return f"{digest}|{os.environ.get('SETTING', '<unset>')}|{seen[0]}|{seen[1]}"


@dsl.pipeline
def k8s_optional_inputs(
    optional_affinity: Optional[Dict[str, Any]] = None,
    optional_selector: Optional[Dict[str, Any]] = None,
    optional_secret_name: Optional[str] = None,
    optional_config_map_name: Optional[str] = None,
    optional_image_pull_secret_name: Optional[str] = None,
    optional_tolerations: Optional[List[Dict[str, Any]]] = None,
) -> str:
    task = report()
    task.set_caching_options(enable_caching=False)
    kubernetes.add_node_affinity_json(task, node_affinity_json=optional_affinity)
    kubernetes.add_node_selector_json(task, node_selector_json=optional_selector)
    kubernetes.use_secret_as_env(
        task, optional_secret_name, {"password": "PASSWORD"}, optional=True
    )
    kubernetes.use_secret_as_volume(task, optional_secret_name, "/mnt/secret", optional=True)
    kubernetes.use_config_map_as_env(
        task, optional_config_map_name, {"setting": "SETTING"}, optional=True
    )
    kubernetes.use_config_map_as_volume(
        task, optional_config_map_name, "/mnt/config", optional=True
    )
    kubernetes.set_image_pull_secrets(task, [optional_image_pull_secret_name])
    kubernetes.add_toleration_json(task, toleration_json=optional_tolerations)
    return task.output
