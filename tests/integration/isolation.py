"""Pipelines for the isolation tests: a namespace's own work, and a component of another
namespace that tries to reach what is not its own.

No `from __future__ import annotations` here: kfp reads the components' annotations as types.
"""

from kfp import dsl, kubernetes


@dsl.component(base_image="python:3.11")
def produce(text: str, data: dsl.Output[dsl.Dataset]) -> str:
    """An artifact, and a line in this task's log to look for."""
    with open(data.path, "w") as f:
        f.write(text)
    print(f"producing {text}")
    return data.path


@dsl.component(base_image="python:3.11")
def consume(data: dsl.Input[dsl.Dataset]) -> str:
    """The artifact's text, and whether this task could change it (it must not)."""
    with open(data.path) as f:
        text = f.read()
    try:
        with open(data.path, "a") as f:
            f.write("changed")
    except OSError as exc:
        return f"{text}|{type(exc).__name__}"
    return f"{text}|writable"


@dsl.component(base_image="python:3.11")
def with_key() -> str:
    """The length of `$API_KEY` (its own namespace's secret), never its value."""
    import os

    return str(len(os.environ.get("API_KEY", "")))


@dsl.pipeline(name="owned")
def owned(text: str = "team data") -> str:
    """A namespace's own work: an artifact passed between tasks, and its own secret."""
    made = produce(text=text)
    keyed = with_key()
    kubernetes.use_secret_as_env(keyed, "api", {"key": "API_KEY"})
    return consume(data=made.outputs["data"]).output


@dsl.component(base_image="python:3.11")
def snoop(secrets: list, home: str, paths: list, writes: list) -> str:
    """Everything a hostile component tries, as a JSON report of what succeeded.

    `secrets` are strings it must find nowhere: its environment, any process's environment or
    command line, any file it can see (but its own folder, which holds its arguments); `paths`
    it must not read; `writes` it must not change. It lists what it sees of the server's
    `home` (only its own run's files may be there). (Its memory, a copy of the fork server's,
    is searched by the test, in the fork server.)
    """
    import json
    import os
    import sys

    wanted = [s.encode() for s in secrets]
    found = {"env": [], "proc": [], "files": [], "home": [], "read": [], "written": []}
    environ = "\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()
    found["env"] = [s.decode() for s in wanted if s in environ]
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    for pid in pids:
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            found["proc"] += [f"{pid}/{what}" for s in wanted if s in data]
    own = os.getcwd()  # its own folder holds its arguments (the secrets looked for)
    python = tuple(p for p in {sys.prefix, sys.base_prefix} if p != "/")
    tops = ["/etc", "/tmp", "/home", "/root", "/run", "/var", "/srv", "/opt", "/mnt", home]
    for top in tops:
        for folder, dirs, files in os.walk(top):
            if folder.startswith(own) or folder.startswith(python):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(folder, name)
                if folder.startswith(home):
                    found["home"].append(path)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > 1 << 20:
                        continue
                    with open(path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                found["files"] += [path for s in wanted if s in data]
    for path in paths:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as fh:
                    fh.read(1)
            found["read"].append(path)
        except OSError:
            pass
    for path in writes:
        try:
            with open(path, "a") as fh:
                fh.write("tampered")
            found["written"].append(path)
        except OSError:
            pass
    found["pids"] = pids
    return json.dumps(found)


@dsl.pipeline(name="hostile")
def hostile(secrets: list, home: str, paths: list, writes: list) -> str:
    return snoop(secrets=secrets, home=home, paths=paths, writes=writes).output
