"""Seed 001's auth mode: a tool asks for a credential, the user's next message is it, and the secret
lives outside the event log.

The log records only that a credential was asked for, provided or cancelled (Session.CredentialRequested,
CredentialProvided, CredentialCancelled): an event store is append-only, copied and exported, so a
secret written there could never be taken back. The value goes to a file per workspace, readable by
its owner only, beside the default database (`.chronicle/credentials.json`); a tool reads it with
`ToolContext.credential(name)`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chronicle.domain.session import Session

from .tools.base import ToolError

CREDENTIALS_FILE = Path(".chronicle") / "credentials.json"


class AwaitingCredential(ToolError):
    """Raised by ToolContext.credential for a credential the store lacks: the call fails with a note to the model,
    and the turn's end puts the session in auth mode."""

    def __init__(self, name: str, prompt: str) -> None:
        super().__init__(f"awaiting credential {name!r}: the user has been asked for it ({prompt}); "
                         "tell the user, and call the tool again once they have provided it")
        self.name = name
        self.prompt = prompt


class CredentialStore:
    """Named secrets of one workspace, in a file only its owner reads (0600), never in the event store."""

    def __init__(self, workspace: Path) -> None:
        self.path = Path(workspace) / CREDENTIALS_FILE

    def get(self, name: str) -> str | None:
        return _read(self.path).get(name)

    def put(self, name: str, value: str) -> None:
        data = _read(self.path)
        data[name] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_suffix(".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temp, self.path)


def _read(path: Path) -> dict[str, str]:
    """The credential file's names and values; {} when there is none. One that is not JSON raises ValueError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def stored_values(path: str | Path) -> list[str]:
    """Every value the credential file at `path` holds (none if it is missing or not one): what the secret scan
    cuts from tool output and model text (runtime/secret_scan.py)."""
    try:
        return list(_read(Path(path)).values())
    except (OSError, ValueError):
        return []


def take_credential(session: Session, text: str, now: Any) -> bool:
    """If the session is in auth mode, `text` is the credential: stored, recorded as provided (without its value),
    and True — the caller queues nothing, starts no turn, logs nothing. Otherwise False."""
    if session.pending_auth is None:
        return False
    CredentialStore(Path(session.spec.workspace)).put(str(session.pending_auth["name"]), text.strip())
    session.credential_provided(now)
    return True


def leave_auth(store: Any, session_id: Any, reason: str, actor: str | None = None) -> str | None:
    """Seed 001: any control submission leaves auth mode, whether or not it can do what it asks (a cancel with nothing
    running, an undo the branch refuses). Records CredentialCancelled with `reason` if the session waits for a
    credential; its name, or None when it did not wait (nothing is recorded then). `store`: a ChronicleStore."""
    from .actor import recorded_actor
    from .clock import SYSTEM_CLOCK

    left: list[str] = []
    now = SYSTEM_CLOCK.now()

    def command(session: Session) -> None:
        left[:] = [str(session.pending_auth["name"])] if session.pending_auth is not None else []
        session.cancel_auth(reason, now, recorded_actor(actor))

    if store.session(session_id, copy=False).pending_auth is None:  # only read: most sessions are not in auth mode
        return None
    store.update_session(session_id, command)
    return left[0] if left else None


def left_auth_note(name: str | None) -> str:
    """What a refused control adds to its error when it left auth mode (empty when it did not)."""
    return f"; auth mode left: credential {name!r} is no longer awaited, the next message is an ordinary input" if name else ""


def record_requests(session: Session, requests: dict[str, dict[str, str]], now: Any) -> None:
    """What the turn's tools asked for (LoopIO.credential_requests): the last ask puts the session in auth mode."""
    asked = requests.pop(str(session.id), None)
    if asked is not None:
        session.await_credential(asked["name"], asked["prompt"], asked.get("tool_call_id", ""), now)
