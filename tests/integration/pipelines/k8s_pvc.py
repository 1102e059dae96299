"""A volume made by CreatePVC, written by one task, read by the next, then deleted."""

from kfp import dsl, kubernetes


@dsl.component
def write(text: str) -> str:
    import os

    os.makedirs("/data/shared", exist_ok=True)
    with open("/data/shared/message.txt", "w") as fh:
        fh.write(text)
    with open("/scratch/tmp.txt", "w") as fh:  # a scratch volume: this task's own, then gone
        fh.write("scratch")
    return os.getcwd()


@dsl.component
def read() -> str:
    import os

    with open("/mnt/volume/message.txt") as fh:  # the volume's `shared` sub path
        text = fh.read()
    return f"{text}|{os.listdir('/scratch')}"


@dsl.pipeline
def k8s_pvc(text: str = "hello through a volume") -> str:
    pvc = kubernetes.CreatePVC(
        pvc_name_suffix="-k8s-pvc", access_modes=["ReadWriteOnce"], size="1Gi"
    )
    writer = write(text=text)
    kubernetes.mount_pvc(writer, pvc.outputs["name"], "/data")
    kubernetes.empty_dir_mount(writer, "scratch", "/scratch")
    reader = read().after(writer)
    kubernetes.mount_pvc(reader, pvc.outputs["name"], "/mnt/volume", sub_path="shared")
    kubernetes.empty_dir_mount(reader, "scratch", "/scratch", medium="Memory")
    kubernetes.DeletePVC(pvc_name=pvc.outputs["name"]).after(reader)
    return reader.output
