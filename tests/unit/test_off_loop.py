"""Background store calls of a running turn (lease renewals, cancel checks) run off the event loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from chronicle.runtime.off_loop import off_the_loop


def test_a_blocking_call_leaves_the_loop_free_to_run_other_work():
    """The call waits for something only another coroutine does: on the loop's thread it could
    not happen, and the call would give up after 5 s with False."""
    gate = threading.Event()

    async def main() -> list[object]:
        async def open_gate() -> str:
            gate.set()
            return "opened"

        return await asyncio.wait_for(asyncio.gather(off_the_loop(lambda: gate.wait(5) and "waited"), open_gate()), 10)

    assert asyncio.run(main()) == ["waited", "opened"]


def test_the_calls_exception_reaches_the_awaiting_coroutine():
    def fails() -> None:
        raise LookupError("the store is away")

    async def main() -> None:
        await off_the_loop(fails)

    with pytest.raises(LookupError, match="the store is away"):
        asyncio.run(main())


def test_a_call_still_running_when_the_process_ends_does_not_hold_the_exit():
    """asyncio's own executor threads are joined at exit: a retry stuck on a lost database would
    keep `run` from reporting it for as long as the retry lasts."""
    program = (
        "import asyncio, time\n"
        "from chronicle.runtime.off_loop import off_the_loop\n"
        "async def main():\n"
        "    task = asyncio.ensure_future(off_the_loop(time.sleep, 60))\n"
        "    await asyncio.sleep(0.2)\n"
        "    task.cancel()\n"
        "asyncio.run(main())\n"
        "print('exited')\n"
    )
    assert _output_of(program) == "exited"


def test_calls_reuse_idle_threads_and_never_wait_behind_a_busy_one():
    """A server's live stream makes a call every 0.2 s: one thread serves them in turn. Calls that
    run at once each get a thread, or one waiting on the other would wait forever (here: 5 s)."""
    first, second = threading.Event(), threading.Event()

    def pool() -> set[int]:
        return {t.ident or 0 for t in threading.enumerate() if t.name.startswith("chronicle-off-loop")}

    async def main() -> tuple[set[int], set[int], list[bool]]:
        await off_the_loop(threading.get_ident)
        before = pool()
        used = {await off_the_loop(threading.get_ident) for _ in range(20)}
        both = await asyncio.gather(off_the_loop(lambda: (first.set(), second.wait(5))[1]),
                                    off_the_loop(lambda: (second.set(), first.wait(5))[1]))
        return before, used, list(both)

    before, used, both = asyncio.run(main())
    assert used <= before  # twenty calls in turn, no new thread
    assert both == [True, True]


def test_a_forked_child_starts_threads_of_its_own():
    """The parent's idle threads are not in the child: a call handed to them would never run."""
    program = (
        "import asyncio, os, threading\n"
        "from chronicle.runtime.off_loop import off_the_loop\n"
        "asyncio.run(off_the_loop(threading.get_ident))\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print(asyncio.run(asyncio.wait_for(off_the_loop(lambda: 'served'), 5)), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    assert _output_of(program) == "served"


def _output_of(program: str) -> str:
    """What a Python program run on its own printed; it must have exited cleanly within 30 s."""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
