"""`kill -USR1 PID` makes a long-running process (`serve`, `worker`) print every thread's stack to its stderr.

A server or worker that stops answering gives nothing to read by itself: a request waiting on a lock, a
pool or a socket looks the same from outside as one that is merely slow. The stacks say which, without
a debugger or a restart that would end the very wait to be understood. The process goes on as it was."""

from __future__ import annotations

import faulthandler
import signal
import sys

#: The signal that asks for the stacks: SIGUSR1, where the platform has it.
DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)


def dump_stacks_on_signal() -> bool:
    """Register the dump for DUMP_SIGNAL on stderr; False where it cannot be (no SIGUSR1, or no real stderr file)."""
    if DUMP_SIGNAL is None:
        return False
    try:
        faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
    except (AttributeError, ValueError, OSError, RuntimeError):  # a stderr without a file descriptor (captured)
        return False
    return True
