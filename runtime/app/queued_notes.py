"""The setup notes of a session whose input was just recorded for a worker, worked out before any worker runs it.

Where a loop is built (app/loops.py) these are said: `run` prints them, the library warns of them and
returns them on RunResult.notes, a worker logs them once. A client that only records an input and
leaves the running to a worker (the HTTP API, whose worker runs in the server's process) never sees
that log, so the server works out the same notes when it records the input and answers with them:
a tool the session's import path no longer holds, CHRONICLE_THINKING_TOKENS for a provider that takes
no thinking budget. Nothing here refuses or records anything: the input is recorded already.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from ..providers import default_provider_name
from ..store import ChronicleStore
from ..tools.imports import is_import_path
from ..toolsets import toolbox_for
from .model_change import unused_thinking_budget
from .vanished_tools import checked_tools


def queued_notes(store: ChronicleStore, sid: UUID, workspace: Path | None = None, *, started: bool = False,
                 environment_applies: bool = True) -> list[str]:
    """The notes building the loop of session `sid` would give, in build_loop's order (tools, then the thinking budget).

    `workspace`: where the worker runs it (its override), else the session's own. `started`: the session was just
    started, so no tool it recorded can have gone. `environment_applies`: the loop is built in this process (a server
    with its own worker), so its environment (CHRONICLE_THINKING_TOKENS) is the one that will be ignored."""
    session = store.session(sid, copy=False)
    spec = session.spec
    notes: list[str] = []
    paths = [t for agent in (spec, *spec.registry) for t in agent.tools if is_import_path(t)]
    where = (workspace or Path(spec.workspace or ".")).expanduser().resolve()
    if paths and not started and where.is_dir():
        try:
            notes += checked_tools(store, session, toolbox_for(spec.tools, where, []), where)
        except ValueError as exc:  # a called tool gone (VanishedTool), or a path that no longer loads
            notes.append(f"note: {exc} (the input is recorded; no worker can run it until then)")
    if environment_applies:
        thinking = unused_thinking_budget(spec.provider or default_provider_name() or "")
        if thinking:
            notes.append(thinking)
    return notes
