"""`kill -USR1` on a running worker prints where each thread is, and the worker goes on."""

from __future__ import annotations

import subprocess
import sys
import time

from chronicle.runtime.stack_dumps import DUMP_SIGNAL
from tests import processes
from tests.helpers import _base_env


def test_a_worker_asked_with_sigusr1_prints_its_stacks_and_goes_on_until_told_to_stop(sqlite_url, workspace):
    assert DUMP_SIGNAL is not None
    env = {**_base_env(), "CHRONICLE_DB": sqlite_url}
    proc = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.05", "--workspace", str(workspace)],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # its "started" line: the handler was registered before the store opened
        assert ": started (" in first, first + proc.stderr.read()
        proc.send_signal(DUMP_SIGNAL)
        time.sleep(0.5)
        assert proc.poll() is None  # still working
        proc.terminate()
        _, said = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "(most recent call first)" in said, said[-2000:]
    assert "worker" in said  # its own frames are named: runtime/cli/worker_cmd.py, runtime/worker…
    assert proc.returncode == 0, said[-2000:]
