"""Field paths, pod labels and annotations, and settings with no meaning on one machine."""

from kfp import dsl, kubernetes


@dsl.component
def pod_info() -> dict:
    import os

    names = ["POD_NAME", "POD_UID", "NAMESPACE", "TEAM", "NOTE", "RUN_LABEL", "NODE", "POD_IP"]
    return {name: os.environ[name] for name in names}


@dsl.pipeline
def k8s_pod() -> dict:
    task = pod_info()
    kubernetes.add_pod_label(task, "team", "ml")
    kubernetes.add_pod_annotation(task, "note", "hello there")
    for env, path in [
        ("POD_NAME", "metadata.name"),
        ("POD_UID", "metadata.uid"),
        ("NAMESPACE", "metadata.namespace"),
        ("TEAM", "metadata.labels['team']"),
        ("NOTE", "metadata.annotations['note']"),
        ("RUN_LABEL", "metadata.labels['pipeline/runid']"),
        ("NODE", "spec.nodeName"),
        ("POD_IP", "status.podIP"),
    ]:
        kubernetes.use_field_path_as_env(task, env, path)
    kubernetes.add_toleration(task, key="nvidia.com/gpu", operator="Exists")
    kubernetes.add_node_selector(task, "disktype", "ssd")
    kubernetes.set_image_pull_secrets(task, ["regcred"])
    return task.output
