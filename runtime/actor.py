"""Who is deciding: the identity recorded on approvals, denials, steering, cancels, undo/redo and resumes.

From the CLI it is the OS user and host (`CHRONICLE_ACTOR` overrides it, e.g. for a service account
or a CI job naming its run); a library or server caller passes its own caller's identity instead.
The mechanism (`--yes`, `always`, a policy) is recorded apart from it, on the decision itself.
"""

from __future__ import annotations

import getpass
import os
import socket


def process_actor() -> str:
    explicit = os.environ.get("CHRONICLE_ACTOR", "").strip()
    if explicit:
        return explicit
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (some containers)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"
