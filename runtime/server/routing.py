"""Where a channel's message goes: the channel's one session, or a session of the sender's own.

`route = "per_sender"` (seed 001's SessionManager: (channel, sender) → session) needs no table
of its own and no memory of the process: a sender's session id is derived from the channel and
the sender (uuid5), so a restarted server, or a second one on the same database, finds the same
session by asking the store whether it exists. The first message creates it (two creators at
once collide on the id, and the loser queues on the winner's). A sender whose session was erased
(`chronicle forget`) gets the next id of the sequence: a fresh session, since the old id stays taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from uuid import UUID, uuid5

from eventsourcing.persistence import IntegrityError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app.resume import submit
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore, ForgottenSession, NotFound

from .channels import ChannelConfig, ChannelError

#: The namespace of per-sender session ids (uuid5 of "channel\0sender\0generation").
SENDER_SESSIONS = UUID("6c1f3b0e-4a8d-5e2b-9a61-0c7d2f1e8b34")
#: Erased sessions one sender may have had before a fresh id is given up on.
GENERATIONS = 100


def sender_session_id(channel: str, sender: str, generation: int = 0) -> UUID:
    return uuid5(SENDER_SESSIONS, f"{channel}\0{sender}\0{generation}")


def _forgotten(exc: Exception) -> bool:
    return isinstance(exc, ForgottenSession)


@dataclass
class Router:
    """Records a channel's input where its route sends it; returns the session it went to."""

    store: ChronicleStore
    #: channel name -> a function that builds (and checks) the spec of a new sender's session.
    specs: dict[str, Callable[[], AgentSpec]] = field(default_factory=dict)
    #: Sessions this process queued a channel input on: the outbox looks at these between its full scans.
    touched: set[UUID] = field(default_factory=set)

    def session_for(self, channel: str, config: ChannelConfig, sender: str) -> tuple[UUID, bool]:
        """The session a message from `sender` goes to, and whether it exists yet."""
        if config.route == "session":
            assert config.session is not None
            return self.store.resolve_session_id(config.session), True
        for generation in range(GENERATIONS):
            sid = sender_session_id(channel, sender, generation)
            try:
                self.store.session(sid, copy=False)
                return sid, True
            except NotFound as exc:
                if _forgotten(exc):
                    continue
                return sid, False
        raise RuntimeError(f"sender {sender!r} of channel {channel!r} has had {GENERATIONS} sessions erased; no new id is left")

    def record(self, channel: str, config: ChannelConfig, senders: list[str], text: str) -> UUID:
        origin: dict[str, Any] = {"channel": channel, "senders": list(senders), "reply": config.reply_url is not None}
        if config.route == "session":
            assert config.session is not None
            sid = submit(self.store, text, session=config.session, origin=origin).session_id
        else:
            sid, exists = self.session_for(channel, config, senders[0])
            created = False
            if not exists:
                try:
                    start_session(self.store, self.specs[channel](), text, session_id=sid, origin=origin)
                    created = True  # with the input as its first
                except IntegrityError:
                    pass  # another request (or server) created it a moment ago: queue on it
            if not created:
                submit_input(self.store, sid, text, origin=origin)
        self.touched.add(sid)
        return sid


def sender_spec(name: str, channel: ChannelConfig, workspace: Path | None, agents: Path | None,
                library: dict[str, Any]) -> Callable[[], AgentSpec]:
    """How a per-sender channel starts a session: as its `agent` (of the registry file, or one defined
    in code), with its provider and model, checked as `POST /sessions` checks one. It is checked
    once now, so a channel that could start no session stops `serve` (exit 2) instead of failing
    on its first message."""
    from chronicle.runtime.agents.registry import MAIN, RegistryError, find_registry
    from chronicle.runtime.app.errors import AppError
    from chronicle.runtime.app.resume import checked_spec
    from chronicle.runtime.app.specs import resolve_workspace

    agent = channel.agent or MAIN
    provider, model, registry = channel.provider, channel.model, None
    try:
        where = resolve_workspace(workspace)
        coded = library.get(agent)
        if coded is not None:
            provider, model = provider or coded.provider, model or coded.model
            registry = coded.registry(workspace)
        elif agent != MAIN:
            found = find_registry(agents, where)
            if agent not in found.names():
                known = ", ".join([*found.names(), *sorted(library)])
                raise ChannelError(f"[channels.{name}] agent: unknown agent {agent!r}; agents: {known}")
            registry = found.starting_as(agent)

        def build() -> AgentSpec:
            return checked_spec(provider, model, where, agents=agents, registry=registry)

        build()
    except (AppError, RegistryError, ValueError, TypeError) as exc:
        if isinstance(exc, ChannelError):
            raise
        raise ChannelError(f"[channels.{name}] cannot start a session for a sender: {exc}") from None
    return build
