"""Platform settings: what kfp-kubernetes asks of a cluster, emulated on one machine.

`kubernetes` parses the platform document into per-executor settings and plans each task's
environment, files and mounts; `secrets` is the local store of secrets and config maps;
`volumes` makes volumes (CreatePVC, DeletePVC) and mounts them in a private mount namespace;
`apply` does all of it inside the task process, before the component starts.
"""
