"""Platform settings: what kfp-kubernetes asks of a cluster, emulated on one machine.

`kubernetes` parses the platform document into per-executor settings and plans each task
attempt (`pod.TaskPlatform`: env values, secret files, mounts, the pod it emulates);
`secrets` is the local store of secrets and config maps; `volumes` makes volumes (CreatePVC,
DeletePVC) and mounts them in a private mount namespace; `apply` does it all inside the task
process, before the component starts. Imports point down: this package needs only `errors`.
"""
