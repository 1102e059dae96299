"""Several `headwater server`s on one database share its queue: each run executes exactly once,
whichever server took it and whether a server dies meanwhile; a server whose machine dies
hands its runs to another within its lease; a terminate reaches a run on another machine.

Real parts only: `headwater server` subprocesses on one SQLite home or one PostgreSQL
database, the stock `kfp.Client`, tasks that record every execution in a file. "Another
machine" is a server in a UTS namespace of its own (`unshare -u`: another host name, as the
store sees it), which needs root; without it those tests are skipped.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cli_harness import process_gone, wait_for
from postgres_db import BASE_URL, fresh_database
from server_harness import held, kfp_client, marked, start_server, stop, wait_state

from headwater.metadata.sql import SqlMetadataStore

pytestmark = pytest.mark.integration

#: Runs per test (HEADWATER_TEST_SEVERAL_RUNS for a longer soak, as issue 30's 200).
RUNS = int(os.environ.get("HEADWATER_TEST_SEVERAL_RUNS", "40"))


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-u", "sh", "-c", "hostname another-machine"]
    return subprocess.run(probe, capture_output=True).returncode == 0


ANOTHER_MACHINE = ("unshare", "-u", "sh", "-c", 'hostname another-machine && exec "$@"', "sh")
needs_unshare = pytest.mark.skipif(
    not _can_unshare(), reason="another host name needs `unshare -u` (root)"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared-home' / 'metadata.db'}"
        return
    if not BASE_URL:
        pytest.skip("set HEADWATER_TEST_POSTGRES_URL for the PostgreSQL runs of these tests")
    with fresh_database() as url:
        yield url


@contextlib.contextmanager
def servers(
    tmp_path: Path, url: str, *extra: str, names: tuple[str, ...] = ("a", "b")
) -> Iterator[dict[str, tuple[subprocess.Popen[Any], str]]]:
    """Servers on one store, each with a home of its own (logs, environments) but the
    SQLite ones sharing the store's."""
    (tmp_path / "shared-home").mkdir(exist_ok=True)
    started: dict[str, tuple[subprocess.Popen[Any], str]] = {}
    try:
        for name in names:
            home = tmp_path / "shared-home" if url.startswith("sqlite") else tmp_path / name
            started[name] = start_server(
                home, "--max-concurrent-runs", "3", "--metadata-url", url, *extra
            )
        yield started
    finally:
        for proc, _ in started.values():
            stop(proc)


def marks(path: Path) -> Counter[str]:
    return Counter(line.split()[0] for line in path.read_text().splitlines())


@pytest.mark.parametrize("names", [("a", "b"), ("a", "b", "c")], ids=["two", "three"])
def test_each_run_executes_exactly_once_across_servers_and_a_server_killed(
    tmp_path: Path, store_url: str, names: tuple[str, ...]
) -> None:
    log = tmp_path / "marks.txt"
    log.touch()
    with servers(tmp_path, store_url, names=names) as started:
        clients = {name: kfp_client(base) for name, (_, base) in started.items()}
        ids: list[str] = []
        lock = threading.Lock()

        def submit(client: Any, tokens: range) -> None:
            for i in tokens:
                run_id = client.create_run_from_pipeline_func(
                    marked, arguments={"path": str(log), "token": f"t{i}"}
                ).run_id
                with lock:
                    ids.append(run_id)

        half = RUNS // 2
        threads = [
            threading.Thread(
                target=submit, args=(clients[names[i % len(names)]], range(i, half, 4))
            )
            for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Server b dies with runs queued and running (its workers go on: sessions of their
        # own); a takes the rest of the queue, and more runs.
        os.kill(started["b"][0].pid, signal.SIGKILL)
        started["b"][0].wait()
        submit(clients["a"], range(half, RUNS))
        states = [
            clients["a"].wait_for_run_completion(r, 180, sleep_duration=0.2).state for r in ids
        ]
    assert len(ids) == RUNS and states == ["SUCCEEDED"] * RUNS
    counted = marks(log)
    assert set(counted) == {f"t{i}" for i in range(RUNS)}
    assert max(counted.values()) == 1, [t for t, n in counted.items() if n > 1]


def _held_run(client: Any, url: str, counter: Path, pid_file: Path, gate: Path) -> Any:
    """Start a `held` run and wait for its held task; returns its id and record then."""
    run_id = client.create_run_from_pipeline_func(
        held, arguments={"counter": str(counter), "pid_file": str(pid_file), "gate": str(gate)}
    ).run_id
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the task")
    with SqlMetadataStore(url) as store:
        taken = store.get_run(run_id)
    assert taken is not None and taken.engine_pid
    return run_id, taken


@needs_unshare
def test_a_dead_machines_runs_are_resumed_by_another_server_within_its_lease(
    tmp_path: Path,
) -> None:
    if not BASE_URL:
        pytest.skip("two machines share PostgreSQL: set HEADWATER_TEST_POSTGRES_URL")
    with fresh_database() as url:
        counter, pid_file, gate = tmp_path / "n", tmp_path / "pid", tmp_path / "gate"
        elsewhere, base_b = start_server(
            tmp_path / "b", "--metadata-url", url, "--lease-seconds", "3", prefix=ANOTHER_MACHINE
        )
        try:
            run_id, taken = _held_run(kfp_client(base_b), url, counter, pid_file, gate)
            assert taken.engine_host == "another-machine"
            # The other machine dies: its server, its worker and the task, all at once.
            for pid in (elsewhere.pid, taken.engine_pid, int(pid_file.read_text())):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            elsewhere.wait()
            wait_for(lambda: process_gone(taken.engine_pid), 10, "the worker gone")
        finally:
            stop(elsewhere)
        proc_a, base_a = start_server(tmp_path / "a", "--metadata-url", url, "--lease-seconds", "3")
        try:
            client_a = kfp_client(base_a)
            pid_file.unlink()
            began = time.monotonic()
            wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 30, "the resume")
            assert time.monotonic() - began < 3 + 10  # the lease, then a few ticks
            gate.write_text("go")
            run = client_a.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
            assert run.state == "SUCCEEDED"
            assert counter.read_text() == "x"  # the finished task was not run again
        finally:
            stop(proc_a)


@needs_unshare
def test_a_terminate_reaches_a_run_on_another_machine(tmp_path: Path) -> None:
    if not BASE_URL:
        pytest.skip("two machines share PostgreSQL: set HEADWATER_TEST_POSTGRES_URL")
    with fresh_database() as url:
        pid_file, gate = tmp_path / "pid", tmp_path / "gate"
        proc_b, base_b = start_server(
            tmp_path / "b", "--metadata-url", url, "--lease-seconds", "3", prefix=ANOTHER_MACHINE
        )
        try:
            run_id = (
                kfp_client(base_b)
                .create_run_from_pipeline_func(
                    held,
                    arguments={
                        "counter": str(tmp_path / "n"),
                        "pid_file": str(pid_file),
                        "gate": str(gate),
                    },
                )
                .run_id
            )
            wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the task")
            proc_a, base_a = start_server(
                tmp_path / "a", "--metadata-url", url, "--lease-seconds", "3"
            )
            try:
                client_a = kfp_client(base_a)
                client_a.terminate_run(run_id)  # through the server on this machine
                run = wait_state(client_a, run_id, ("CANCELED",), timeout=30)
                assert run.state == "CANCELED"
                wait_for(lambda: process_gone(int(pid_file.read_text())), 20, "the task stopped")
            finally:
                stop(proc_a)
        finally:
            stop(proc_b)


def test_a_worker_cut_off_from_the_database_leaves_its_run_before_its_lease_ends(
    tmp_path: Path,
) -> None:
    # Another server takes a run over once its lease ends; the worker that held it must have
    # stopped by then, or the run would execute twice. Cut off (its database refuses it), the
    # worker leaves after half its lease, and its server resumes the run once it is back.
    if not BASE_URL:
        pytest.skip("set HEADWATER_TEST_POSTGRES_URL: the database is cut off on PostgreSQL")
    lease_s = 6.0
    with fresh_database() as url:
        counter, pid_file, gate = tmp_path / "n", tmp_path / "pid", tmp_path / "gate"
        proc, base = start_server(
            tmp_path / "a", "--metadata-url", url, "--lease-seconds", str(lease_s)
        )
        # From the database the tests start from: one cannot refuse connections to its own.
        name = sa.make_url(url).database
        admin_url = sa.make_url(url).set(database=sa.make_url(BASE_URL).database)
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
        try:
            client = kfp_client(base)
            run_id, taken = _held_run(client, url, counter, pid_file, gate)
            task_pid = int(pid_file.read_text())
            with admin.connect() as conn:
                conn.execute(sa.text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false'))
                cut = time.monotonic()
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )
            try:
                # Renewed at most lease/6 before the cut, its lease ends no sooner than this.
                wait_for(lambda: process_gone(taken.engine_pid), lease_s * 5 / 6, "the worker")
                wait_for(lambda: process_gone(task_pid), lease_s * 5 / 6, "its task")
            finally:
                with admin.connect() as conn:
                    conn.execute(sa.text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true'))
            assert time.monotonic() - cut < lease_s * 5 / 6
            said = (tmp_path / "a" / "server-logs" / f"{run_id}.log").read_text()
            assert f"run {run_id} could not renew its lease for half of it" in said
            # The server said once that its database was unreachable, without a traceback.
            log = (tmp_path / "server.log").read_text()
            assert "Traceback" not in log and "not currently accepting connections" in log
            pid_file.unlink()
            wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the resume")
            gate.write_text("go")
            run = client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
            assert run.state == "SUCCEEDED"
            assert counter.read_text() == "x"  # the finished task was not run again
        finally:
            gate.write_text("go")  # a task left waiting would keep its worker on the database
            admin.dispose()
            stop(proc)


@needs_unshare
def test_each_machine_runs_up_to_its_own_limit(tmp_path: Path) -> None:
    # --max-concurrent-runs is the machine's: two machines with a limit of one run two runs at
    # once, where counting every server's runs held the second in the queue.
    if not BASE_URL:
        pytest.skip("two machines share PostgreSQL: set HEADWATER_TEST_POSTGRES_URL")
    with fresh_database() as url:
        one = ("--metadata-url", url, "--max-concurrent-runs", "1")
        proc_b, _ = start_server(tmp_path / "b", *one, prefix=ANOTHER_MACHINE)
        proc_a, base_a = start_server(tmp_path / "a", *one)
        gates = [tmp_path / f"gate-{i}" for i in range(2)]
        try:
            client = kfp_client(base_a)
            # The second waits for the first, unless it runs on the other machine.
            taken = [
                _held_run(client, url, tmp_path / f"n-{i}", tmp_path / f"pid-{i}", gates[i])
                for i in range(2)
            ]
            runs = [run_id for run_id, _ in taken]
            hosts = {record.engine_host for _, record in taken}
            assert hosts == {os.uname().nodename, "another-machine"}
            for gate in gates:
                gate.write_text("go")
            for run_id in runs:
                run = client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
                assert run.state == "SUCCEEDED"
        finally:
            for gate in gates:
                gate.write_text("go")
            stop(proc_a)
            stop(proc_b)
