"""`run_off_loop`: model calls on the prediction pool, never abandoned by a cancelled request."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time

import pytest

from headwater.serving.predictor import POOL_THREADS, run_off_loop

pytestmark = pytest.mark.anyio


async def test_the_call_runs_on_a_pool_thread() -> None:
    name = await run_off_loop(lambda: threading.current_thread().name)
    assert name.startswith("headwater-predict")


async def test_an_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("bad rows")

    with pytest.raises(ValueError, match="bad rows"):
        await run_off_loop(fail)


async def test_a_cancelled_caller_waits_for_the_call_to_end() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def slow() -> str:
        started.set()
        release.wait(10)
        finished.append(True)
        return "done"

    task = asyncio.ensure_future(run_off_loop(slow))
    while not started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.sleep(0.02)
    assert not task.done()  # still waiting on the thread, as anyio.to_thread would
    task.cancel()  # a second cancel does not abandon it either
    await asyncio.sleep(0.02)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]


async def test_more_calls_than_threads_all_finish_on_at_most_a_thread_per_core() -> None:
    names: set[str] = set()

    def work(i: int) -> int:
        names.add(threading.current_thread().name)
        time.sleep(0.002)
        return i

    done = await asyncio.gather(*(run_off_loop(lambda i=i: work(i)) for i in range(40)))
    assert done == list(range(40))
    assert 1 <= len(names) <= POOL_THREADS


async def test_the_call_sees_the_callers_context_variables() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
    var.set("r-17")
    assert await run_off_loop(var.get) == "r-17"


def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    asyncio.run(run_off_loop(lambda: None))
    time.sleep(0.05)  # the parent's thread is idle now, and counted so
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: predict, report, leave without running pytest's exit
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler
        signal.alarm(5)  # a call nobody takes would wait for ever
        os.write(write, asyncio.run(run_off_loop(lambda: b"ok")))
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert (os.read(read, 10), os.waitstatus_to_exitcode(status)) == (b"ok", 0)
