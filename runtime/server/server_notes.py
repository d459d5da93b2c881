"""What the server or a session accepts and does not use, for the `notes` of the HTTP answers.

A session's go with the answer that records its input (app/queued_notes.py). The server's own concern
it as a whole, so they are worked out once, when the app is built, and `GET /healthz` gives them to any
caller with the token. `chronicle serve` also prints the notify ones at start, and its worker logs the thinking
budget's once it builds such a session's loop, but a program talking HTTP sees neither.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from chronicle.runtime.app.model_change import unused_thinking_budget
from chronicle.runtime.app.queued_notes import queued_notes
from chronicle.runtime.app.specs import normalise_provider
from chronicle.runtime.providers import default_provider_name
from chronicle.runtime.routines import RoutineError

from .channels import ChannelConfig

log = logging.getLogger("chronicle.server")


def input_notes(store: Any, sid: UUID, run_worker: bool, started: bool = False) -> list[str]:
    """The setup notes of the session an input was just recorded on, as its worker would log them: the answer's
    `notes`. The input is recorded already, so a failure here is a note too, never the answer (a 5xx would have
    the client record the input again)."""
    try:
        return queued_notes(store, sid, started=started, environment_applies=run_worker)
    except Exception as exc:  # noqa: BLE001 - see above; the log keeps the traceback
        log.warning("session %s: its setup notes could not be worked out", sid, exc_info=exc)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [f"note: the setup notes of session {sid} could not be worked out ({first}); the input is recorded"]


def hook_notes(store: Any, sid: UUID, existed: bool, recorded: bool, channel: ChannelConfig, library: dict[str, Any],
               run_worker: bool) -> list[str]:
    """`POST /hooks/NAME`'s notes: its session's, as `input_notes`; for a new sender's burst still being coalesced
    (no session yet), those its session will start with (the channel's thinking budget: nothing else can be gone)."""
    if existed or recorded:
        return input_notes(store, sid, run_worker, started=not existed)
    thinking = channel_thinking(channel, library) if run_worker else None
    return [thinking] if thinking else []


def channel_thinking(channel: ChannelConfig, library: dict[str, Any]) -> str | None:
    """CHRONICLE_THINKING_TOKENS's note for the sessions a per-sender channel starts (its provider, its coded agent's,
    else the default), as routing.sender_spec picks the provider."""
    coded = library.get(channel.agent or "")
    provider = normalise_provider(channel.provider or (coded.provider if coded is not None else None))
    return unused_thinking_budget(provider or default_provider_name() or "")


def notes_of(config: Any, channels: dict[str, ChannelConfig], library: dict[str, Any], outbox: Any) -> list[str]:
    """`config`: the ServerConfig. In order: the worker's settings without a worker, the per-sender channels whose
    sessions ignore CHRONICLE_THINKING_TOKENS, the routines whose findings this server cannot post."""
    notes = []
    if config.auto_approve and not config.run_worker:
        notes.append("note: auto_approve ignored: this server runs no worker (run_worker is off); "
                     "the worker that runs its sessions decides (`chronicle worker --yes`)")
    if config.run_worker:
        for name, channel in channels.items():
            if channel.route != "per_sender":
                continue
            thinking = channel_thinking(channel, library)
            if thinking:
                notes.append(f"note: channel {name}: {thinking.removeprefix('note: ')}")
    try:
        _, not_here = outbox.notifying()
    except RoutineError:  # `serve` stops on it, in its own words
        not_here = {}
    for channel, names in not_here.items():
        notes.append(f"note: notify ignored: this server does not post the findings of {', '.join(names)}: channel "
                     f"{channel} has no reply_url among its channels (a worker or `routines run` fires them; "
                     "`chronicle serve --workspace W` with that channel posts them)")
    return notes
