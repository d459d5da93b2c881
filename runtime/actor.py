"""Who is deciding: the identity recorded on approvals, denials, steering, cancels, undo/redo and resumes.

From the CLI it is the OS user and host (`CHRONICLE_ACTOR` overrides it, e.g. for a service account
or a CI job naming its run); a library or server caller passes its own caller's identity instead.
The mechanism (`--yes`, `always`, a policy) is recorded apart from it, on the decision itself.

Every actor goes through `recorded_actor` (or `process_actor`) before it is recorded: it is free text from
outside (an environment variable, an HTTP header, a library argument), and a caller that put its
token there (`X-Chronicle-Actor: eve token=ghp_…`) would otherwise have it stored and shown by
history, why and audit for good. What the secret scan finds is recorded as its marker.
"""

from __future__ import annotations

import getpass
import os
import socket


def recorded_actor(actor: str | None) -> str:
    """The actor to record: the caller's, else this process's; any secret in it cut (runtime/secret_scan.py)."""
    return _scanned(actor) if actor else process_actor()


def process_actor() -> str:
    explicit = os.environ.get("CHRONICLE_ACTOR", "").strip()
    if explicit:
        return _scanned(explicit)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (some containers)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _scanned(actor: str) -> str:
    from .secret_scan import scanner_for

    return str(scanner_for(None).text(actor).value)
