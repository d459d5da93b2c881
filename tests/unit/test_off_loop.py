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
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exited"
