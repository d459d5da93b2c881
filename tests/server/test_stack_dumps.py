"""`kill -USR1` on a running server prints where each thread is, and the server goes on serving."""

from __future__ import annotations

import time

import httpx

from chronicle.runtime.stack_dumps import DUMP_SIGNAL
from tests.server.serving import server_process


def test_a_server_asked_with_sigusr1_prints_every_threads_stack_and_keeps_answering(sqlite_url, workspace):
    assert DUMP_SIGNAL is not None  # the suite runs on Linux
    with server_process(sqlite_url, workspace) as (base, proc):
        proc.send_signal(DUMP_SIGNAL)
        time.sleep(0.3)
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200  # the signal did not end it
        proc.terminate()
        said = proc.stderr.read()
    assert "Current thread" in said or "Thread 0x" in said, said[-2000:]
    assert "most recent call first" in said
    # the server's own threads are there, not only the one the signal interrupted: its worker runs on another
    assert said.count("(most recent call first)") >= 2, said[-4000:]
