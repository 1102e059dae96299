"""`headwater` command line: a thin layer over the Python API.

Every command parses its arguments, calls the API and prints. Whatever goes wrong ends in
one line on stderr, never a traceback: bad input exits 2, a failed run or a system error 1,
Ctrl-C 130, and a closed stdout (`headwater runs list | head`) ends quietly, as the shell's
own tools do. An unexpected exception is one line too; its traceback goes to
`$HEADWATER_HOME/last-error.txt` for the bug report. Headwater's own warnings
(`HeadwaterWarning`) are one line each, `headwater: warning: MESSAGE`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from headwater.config import CONTAINER_MODES
from headwater.errors import HeadwaterError, HeadwaterWarning, ParameterError, UserError

if TYPE_CHECKING:
    from headwater.engine.hooks import RunHooks
    from headwater.engine.options import RunOptions
    from headwater.executors.prestart import PrestartedServer

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: The shell's status for a process killed by SIGPIPE (128 + 13), as `yes | head` leaves it.
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"headwater: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's argument parser.

    Args:
        command: The command about to be parsed, when known. For `run` and `compile`, the
            parser then has that command alone: the other commands' modules are not imported
            (~20 ms of `headwater run`'s start). Its help, usage and errors are the same.
    """
    parser = _Parser(prog="headwater", description="Run Kubeflow Pipelines anywhere.")
    parser.add_argument(
        "--metadata-url",
        metavar="URL",
        help="SQLAlchemy URL of the metadata store (default $HEADWATER_METADATA_URL, else "
        "SQLite in $HEADWATER_HOME)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    if command in _OWN_COMMANDS:
        _OWN_COMMANDS[command](sub)
        return parser

    from headwater.cli import endpoints, inspect, models, secrets, serve, tensorboard
    from headwater.cli import server as server_cli
    from headwater.cli import ui as ui_cli

    _add_run(sub)
    endpoints.add_parsers(sub, _Parser)
    inspect.add_parsers(sub, _Parser)
    models.add_parsers(sub, _Parser)
    secrets.add_parsers(sub, _Parser)
    serve.add_parsers(sub, _Parser)
    server_cli.add_parsers(sub, _Parser)
    tensorboard.add_parsers(sub, _Parser)
    ui_cli.add_parsers(sub, _Parser)
    _add_compile(sub)
    return parser


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run a pipeline (.py with @dsl.pipeline, or compiled IR)")
    run.add_argument(
        "pipeline", nargs="?", help="a .py file defining @dsl.pipeline, or a .yaml/.json IR"
    )
    run.add_argument(
        "--resume", metavar="RUN_ID", help="complete a failed or interrupted run, reusing its work"
    )
    run.add_argument(
        "--metadata-url", dest="run_metadata_url", metavar="URL", help=argparse.SUPPRESS
    )
    run.add_argument(
        "--pipeline",
        dest="pipeline_name",
        metavar="NAME",
        help="which pipeline, when the file defines several",
    )
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline parameter; VALUE is JSON, else a string (repeatable)",
    )
    run.add_argument(
        "--json", action="store_true", help="print the result as JSON on the last line"
    )
    run.add_argument(
        "--max-parallel",
        type=int,
        metavar="N",
        help="most tasks at once (default: twice the CPU count)",
    )
    run.add_argument("--no-cache", action="store_true", help="run every task, cached or not")
    run.add_argument(
        "--install-packages",
        action="store_true",
        help="install missing packages_to_install into a cached environment",
    )
    run.add_argument("--pipeline-root", metavar="URI", help="where artifacts are written")
    run.add_argument(
        "--strict-resources",
        action="store_true",
        help="fail a task that asks for more CPU, memory or accelerators than this machine has "
        "(default: run it with what there is, after a warning)",
    )
    run.add_argument(
        "--containers",
        choices=CONTAINER_MODES,
        help="which tasks run in their container images, by Podman or Docker: auto (container "
        "components, when a runtime is found), always (Python components too), never (all on "
        "this machine); default $HEADWATER_CONTAINERS, else auto",
    )
    run.add_argument(
        "--sandbox",
        action="store_true",
        help="run each task on this machine in a sandbox of its own (bubblewrap): it sees the "
        "system and Python read-only, its own inputs and outputs, no other file or process",
    )
    run.add_argument(
        "--sandbox-read",
        action="append",
        default=[],
        metavar="PATH",
        help="with --sandbox: a path every task may read besides its own (repeatable)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="stream task output")
    run.add_argument(
        "--executor",
        default="local",
        metavar="NAME",
        help="where tasks run: local (default), dask, or one a package registers",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --executor dask: the scheduler (default $HEADWATER_DASK_SCHEDULER, else a "
        "local cluster for the run)",
    )
    run.add_argument(
        "--shared-fs",
        action="store_true",
        help="every worker sees the local pipeline root at the same path (NFS, say)",
    )


def _add_compile(sub: Any) -> None:
    comp = sub.add_parser("compile", help="compile a .py pipeline to KFP IR YAML")
    comp.add_argument("pipeline", help="a .py file defining @dsl.pipeline")
    comp.add_argument("--pipeline", dest="pipeline_name", metavar="NAME")
    comp.add_argument("-o", "--output", required=True, help="the .yaml (or .json) to write")


#: The commands this module defines itself, each of which `build_parser` can build alone.
_OWN_COMMANDS: dict[str, Callable[[Any], None]] = {"run": _add_run, "compile": _add_compile}


def parse_params(pairs: Sequence[str], declared: dict[str, str]) -> dict[str, Any]:
    """Turn `NAME=VALUE` strings into arguments, parsing VALUE by the declared type."""
    from headwater.spec.types import parse_cli_value

    params: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ParameterError(f"--param expects NAME=VALUE, got {pair!r}")
        if name in params:
            raise ParameterError(
                f"--param {name} is given twice ({name}={params[name]!r} and {pair!r}): "
                "give each parameter once"
            )
        params[name] = parse_cli_value(value, declared.get(name))
    return params


def run_options(
    args: argparse.Namespace, hooks: Sequence[RunHooks], server: PrestartedServer | None
) -> RunOptions:
    """The `RunOptions` that `headwater run`'s arguments ask for.

    Raises:
        UserError: Options that cannot go together.
    """
    from headwater.engine.options import RunOptions

    if args.scheduler and args.executor != "dask":
        raise UserError("--scheduler is for --executor dask: add --executor dask")
    executor_options: dict[str, Any] = {}
    if args.sandbox_read and not args.sandbox:
        raise UserError("--sandbox-read is for sandboxed tasks: add --sandbox")
    for path in args.sandbox_read:
        if not os.path.exists(path):
            raise UserError(f"--sandbox-read {path!r} does not exist: give a file or folder")
    sandbox = None
    if args.sandbox:
        from headwater.sandbox import SandboxPolicy

        sandbox = SandboxPolicy(readable=tuple(os.path.abspath(p) for p in args.sandbox_read))
    if args.executor == "local":
        executor_options["server"] = server
    else:
        executor_options.update(scheduler=args.scheduler, shared_fs=args.shared_fs)
    return RunOptions.build(
        executor=args.executor,
        max_parallel=args.max_parallel,
        enable_cache=not args.no_cache,
        pipeline_root=args.pipeline_root,
        metadata=args.run_metadata_url or args.metadata_url,
        hooks=list(hooks),
        install_packages=args.install_packages,
        strict_resources=args.strict_resources,
        containers=args.containers,
        sandbox=sandbox,
        requests=None if sandbox is None else _requests(args),
        **executor_options,
    )


def _requests(args: argparse.Namespace) -> Any:
    """Who does what sandboxed tasks ask (register, deploy a model) for `headwater run`."""
    from headwater.components.requests import RunRequests

    return RunRequests(args.run_metadata_url or args.metadata_url)


def _cmd_run(args: argparse.Namespace, server: PrestartedServer | None) -> int:
    from headwater.api.running import resume, run
    from headwater.cli.progress import ConsoleReporter, log_tail

    if args.resume and (args.pipeline or args.param):
        raise UserError("--resume RUN_ID takes no PIPELINE or --param: it reuses the run's own")
    if not args.resume and not args.pipeline:
        raise UserError("headwater run needs a PIPELINE file (or --resume RUN_ID)")
    reporter = ConsoleReporter(sys.stderr, verbose=args.verbose)
    options = run_options(args, [reporter], server)
    if args.executor == "dask":
        _quiet_dask()
    # SIGTERM stops a run as Ctrl-C does: its tasks stopped, the run recorded INTERRUPTED.
    # (Signal handlers belong to the main thread; `main()` called from another has none.)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if in_main else None
    try:
        if args.resume:
            result = resume(args.resume, options=options)
        else:
            # Loaded here to parse --param by the declared types. The fork server (`server`,
            # if `main` started it) warms up on the other core meanwhile; any other executor
            # is made once the pipeline is known to load (a cluster is not started for nothing).
            from headwater.spec.loader import load_pipeline

            ir = load_pipeline(args.pipeline, pipeline_name=args.pipeline_name)
            declared = {n: p.type for n, p in ir.root.interface.input_parameters.items()}
            result = run(ir, parse_params(args.param, declared), options=options)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if result.error is not None:
        err = result.error
        # A task that never ran (a condition that failed to evaluate) has no log to stream,
        # and the run itself (its record unwritable) is no task: say why even with -v.
        what = f"task {err.task!r}" if err.task else f"run {result.run_id}"
        print(f"headwater: {what} failed: {err.error_type}: {err.message}", file=sys.stderr)
    if result.error is not None and not args.verbose:
        err = result.error
        tail = log_tail(err.log_path)
        if tail:
            print(f"headwater: last lines of {err.log_path}:", file=sys.stderr)
            for line in tail:
                print(f"  {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), default=str))
    elif result.outputs:
        for name, value in result.outputs.items():
            print(f"{name} = {json.dumps(value, default=str)}")
    return EXIT_OK if result.succeeded else EXIT_FAILED


def _quiet_dask() -> None:
    """Silence Dask's loggers: its client logs each failed reconnection with a traceback, and
    the CLI says what went wrong in one line of its own instead."""
    import logging  # here: `headwater run` on one machine never imports it

    with contextlib.suppress(ImportError):
        import distributed  # noqa: F401  (it sets its loggers' levels when imported)
    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "distributed"]
    for name in {"distributed", *names}:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _interrupt(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt


def _cmd_compile(args: argparse.Namespace) -> int:
    from headwater.api.compiler import compile as compile_pipeline

    out = compile_pipeline(args.pipeline, args.output, pipeline_name=args.pipeline_name)
    print(f"wrote {out}", file=sys.stderr)
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    from headwater.cli import inspect

    handler = {
        "runs": inspect.cmd_runs,
        "artifacts": inspect.cmd_artifacts,
        "lineage": inspect.cmd_lineage,
        "cache": inspect.cmd_cache,
    }[args.command]
    return handler(args)


def _dispatch(argv: Sequence[str], server: PrestartedServer | None) -> int:
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    if args.command == "run":
        return _cmd_run(args, server)
    if args.command == "compile":
        return _cmd_compile(args)
    if args.command == "secrets":
        from headwater.cli.secrets import cmd_secrets

        return cmd_secrets(args)
    if args.command == "models":
        from headwater.cli.models import cmd_models

        return cmd_models(args)
    if args.command == "endpoints":
        from headwater.cli.endpoints import cmd_endpoints

        return cmd_endpoints(args)
    if args.command == "serve":
        from headwater.cli.serve import cmd_serve

        return cmd_serve(args)
    if args.command == "tensorboard":
        from headwater.cli.tensorboard import cmd_tensorboard

        return cmd_tensorboard(args)
    if args.command == "server":
        from headwater.cli.server import cmd_server

        return cmd_server(args)
    if args.command == "ui":
        from headwater.cli.ui import cmd_ui

        return cmd_ui(args)
    return _cmd_inspect(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code. Never raises, never prints a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    server = _prestart(argv)
    try:
        with _warnings_as_lines():
            return _main(argv, server)
    finally:
        if server is not None:
            server.close()  # if no executor adopted it: bad input, or another executor


def _prestart(argv: Sequence[str]) -> PrestartedServer | None:
    """Start the local executor's fork server now if `argv` is a run that will use it.

    Its ~0.1 s of warming up then overlaps everything the engine does before the first task.
    A wrong guess costs a process started and killed unused, never a wrong run: only the
    `LocalExecutor` of a parsed `run` adopts it.
    """
    if not argv or argv[0] != "run":
        return None
    rest = argv[1:]
    for arg, following in zip(rest, [*rest[1:], None], strict=False):
        if arg in ("-h", "--help"):
            return None
        if arg.startswith("--e"):  # --executor, or an abbreviation of it
            _, equals, value = arg.partition("=")
            if (value if equals else following) != "local":
                return None
    from headwater.executors.prestart import PrestartedServer

    try:
        return PrestartedServer(sandboxed="--sandbox" in rest)
    except OSError:  # no process to spare: the executor tries again, and says why
        return None


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Show Headwater's own warnings as one line on stderr, others as Python shows them.

    Installed for the CLI's run only (never at import): a program that imports headwater
    keeps its own `warnings.showwarning`.
    """
    previous = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, HeadwaterWarning):
            _error(f"warning: {message}")
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def _main(argv: Sequence[str], server: PrestartedServer | None) -> int:
    try:
        code = _dispatch(argv, server)
        # Flushed here, not at exit, so that a reader gone away is seen by the handler below.
        sys.stdout.flush()
        return code
    except UserError as exc:
        _error(f"error: {exc}")
        return EXIT_USAGE
    except HeadwaterError as exc:
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse: --help, or a usage error it has printed
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except Exception as exc:
        _error(f"internal error: {type(exc).__name__}: {exc} ({_save_traceback(exc)})")
        return EXIT_FAILED


def _error(message: str) -> None:
    """One line on stderr, whatever the message holds; silent if stderr is gone too."""
    line = " ".join(message.split("\n"))
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(f"headwater: {line}", file=sys.stderr, flush=True)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit has nowhere to fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _save_traceback(exc: BaseException) -> str:
    """Write `exc`'s traceback to `$HEADWATER_HOME/last-error.txt` (or the temporary
    directory, if the home does not exist); say where, for the one-line report."""
    import tempfile
    import traceback

    from headwater import config

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    home = config.home()
    folder = home if home.is_dir() else Path(tempfile.gettempdir())
    path = folder / ("last-error.txt" if folder == home else "headwater-last-error.txt")
    try:
        path.write_text(f"headwater {' '.join(sys.argv[1:])}\n{text}", encoding="utf-8")
    except OSError as err:
        return f"the traceback could not be saved to {path}: {err.strerror}"
    return f"traceback in {path}; please include it in a bug report"
