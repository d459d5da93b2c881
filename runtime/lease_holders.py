"""Whether a lease's holder is certainly gone: a process of this machine that no longer exists.

Apart from runtime/leases.py (which imports eventsourcing and the domain) so that `sessions` from the read models
(runtime/app/session_listing.py), which imports neither, can tell a turn nobody runs by the rule `resume`, the refusals
of a busy session (runtime/app/stalled.py) and the answers use.
"""

from __future__ import annotations

import os


def holder_gone(holder: str | None) -> bool:
    """True only when the holder is certainly dead: a process of this machine that no longer exists.

    A holder on another machine is never presumed dead; its lease runs out instead."""
    import socket  # here: 1.8 ms of every `sessions` and `log` start-up, for the few rows with a turn in flight

    parts = (holder or "").split(":")
    if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
