"""Pipelines for the isolation tests: a namespace's own work, and a component of another
namespace that tries to reach what is not its own.

No `from __future__ import annotations` here: kfp reads the components' annotations as types.
"""

from kfp import dsl, kubernetes

from headwater.components.registry import register_model


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
        try:  # an existing file (a new one in the sandbox's own folders changes nothing)
            with open(path, "r+b") as fh:
                fh.seek(0, 2)
                fh.write(b"tampered")
            found["written"].append(path)
        except OSError:
            pass
    found["pids"] = pids
    return json.dumps(found)


@dsl.pipeline(name="hostile")
def hostile(secrets: list, home: str, paths: list, writes: list) -> str:
    return snoop(secrets=secrets, home=home, paths=paths, writes=writes).output


@dsl.component(base_image="python:3.11")
def hold(seconds: float) -> str:
    """Keep a task running for `seconds` (while every command line is looked at)."""
    import time

    time.sleep(seconds)
    return "held"


def installing(index: str) -> object:
    """A pipeline whose task installs `hwtestpkg` from `index` (a URL that may hold a
    password) while another task is held."""

    @dsl.component(base_image="python:3.11", packages_to_install=["hwtestpkg"],
                   pip_index_urls=[index])  # fmt: skip
    def installed() -> str:
        import hwtestpkg

        return f"{hwtestpkg.VALUE}@{hwtestpkg.__file__}"

    @dsl.pipeline(name="installing")
    def installing_pipeline() -> str:
        hold(seconds=1.0)
        return installed().output

    return installing_pipeline


def option_as_package(index: str) -> object:
    """A pipeline whose `packages_to_install` has an entry that is a pip option."""

    @dsl.component(base_image="python:3.11",
                   packages_to_install=["hwtestpkg", f"--extra-index-url {index}"])  # fmt: skip
    def confused() -> str:
        return "never runs"

    @dsl.pipeline(name="confused")
    def confused_pipeline() -> str:
        return confused().output

    return confused_pipeline


def peeking(image: str) -> object:
    """A container component in `image` that says whether it can read `path`, and how many
    processes it sees."""

    @dsl.container_component
    def peek(path: str, seen: dsl.OutputPath(str)):  # type: ignore[valid-type]
        script = (
            'if cat "$0" >/dev/null 2>&1; then s=read; else s=hidden; fi; '
            'n=$(ls /proc | grep -c "^[0-9]"); echo "$s $n" > "$1"'
        )
        return dsl.ContainerSpec(image=image, command=["sh", "-c", script], args=[path, seen])

    @dsl.pipeline(name="peeking")
    def peeking_pipeline(path: str) -> str:
        return peek(path=path).outputs["seen"]

    return peeking_pipeline


@dsl.component(base_image="python:3.11")
def train(model: dsl.Output[dsl.Model]) -> None:
    with open(model.path, "w") as f:
        f.write("weights")
    model.metadata["framework"] = "toy"


@dsl.component(base_image="python:3.11")
def register_other(path: str) -> int:
    """Ask the engine to register a file that is not this task's input (it must refuse)."""
    from headwater.components.registration import register_in_run

    return register_in_run(path, "stolen")[1]


@dsl.pipeline(name="registering")
def registering() -> int:
    trained = train()
    return register_model(model=trained.outputs["model"], name="toy").outputs["version"]


@dsl.pipeline(name="stealing")
def stealing(path: str) -> int:
    return register_other(path=path).output


@dsl.component(base_image="python:3.11")
def reach(address: str) -> str:
    """Try to run code on the workers of the Dask cluster at `address`: "refused" if it cannot."""
    try:
        from distributed import Client

        with Client(address, timeout=5) as client:
            return "ran: " + str(client.run(lambda: 1))
    except Exception as exc:
        return f"refused: {type(exc).__name__}"


@dsl.pipeline(name="reaching")
def reaching(address: str) -> str:
    return reach(address=address).output


@dsl.component(base_image="python:3.11")
def credentials(secret: str) -> str:
    """The storage key this task was given, and whether `secret` is in its environment."""
    import os

    seen = "\0".join(os.environ.values())
    return f"{os.environ.get('AWS_ACCESS_KEY_ID', '')}|{secret in seen}"


@dsl.pipeline(name="stored")
def stored(secret: str) -> str:
    """Artifacts passed through the namespace's own object store, with its own credentials."""
    made = produce(text="in the bucket")
    consume(data=made.outputs["data"])
    return credentials(secret=secret).output


@dsl.component(base_image="python:3.11")
def plant(target: str, data: dsl.Output[dsl.Dataset]) -> None:
    """Leave links to `target` where the server reads: its artifact, its log, a retry's files."""
    import os

    os.symlink(target, data.path)
    os.makedirs("outputs", exist_ok=True)
    for name in ("log.txt", "executor_input.json", "pod.json", "outputs/extra"):
        if os.path.lexists(name):
            os.remove(name)
        os.symlink(target, name)
    os.symlink("/etc", "etc-link")


@dsl.pipeline(name="planting")
def planting(target: str) -> None:
    plant(target=target)
