"""Show or change the model a session runs on: one recorded fact (Session.ModelChanged) every client reads.

Before this, `run --session X --model M` asked M for one process only: `resume`, a worker or the next
`run` went back to the spec's model and the audit could not say why a turn had used another. Now the
change is recorded with who made it and when; every later turn, whichever process runs it, asks the
session's recorded model (Session.spec applies the newest change), and each model call keeps the model
it asked (request_delta) so that replay asks the same. `chronicle model`, `run --session --model`,
chat's /model, `Chronicle.set_model` and `POST /sessions/{id}/model` all come here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from chronicle.domain.errors import DomainError

from ..actor import recorded_actor
from ..clock import SYSTEM_CLOCK, Clock
from ..environment import EnvironmentSettingError, environment
from ..providers.base import DEFAULT_MAX_TOKENS
from ..providers.env_settings import SettingError, in_thinking_range
from ..store import ChronicleStore
from .errors import AppError
from .queries import session_id

#: A model name as providers spell them (claude-sonnet-5-5, gpt-4o-mini, llama3.1:8b, org/model@rev).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")
#: Providers whose requests carry no thinking budget: a recorded one would be silently ignored.
NO_THINKING_BUDGET = ("openai-compatible",)


@dataclass(frozen=True)
class ModelChoice:
    """The model a session runs on now, and whether this call changed it."""

    session_id: UUID
    model: str
    #: None: the process default (CHRONICLE_THINKING_TOKENS); 0: off.
    thinking_tokens: int | None
    provider: str
    changed: bool = False
    previous: str | None = None
    actor: str | None = None
    at: str | None = None
    #: The turn running when the change was recorded: it keeps its model, the change applies from the next.
    running_turn_id: UUID | None = None

    def row(self) -> dict[str, Any]:
        """`model --json`, the server's answer, the library's `set_model`."""
        return {"session_id": str(self.session_id), "model": self.model, "thinking_tokens": self.thinking_tokens,
                "provider": self.provider.split(":", 1)[0] or None, "changed": self.changed, "previous": self.previous,
                "changed_by": self.actor, "changed_at": self.at,
                "applies_from": "next_turn" if self.running_turn_id else "now",
                "running_turn_id": str(self.running_turn_id) if self.running_turn_id else None}

    def line(self) -> str:
        thinking = "" if self.thinking_tokens is None else (
            ", thinking off" if self.thinking_tokens == 0 else f", thinking {self.thinking_tokens} tokens")
        if not self.changed:
            return f"session {self.session_id} runs on {self.model}{thinking}"
        when = (f"; turn {self.running_turn_id} is running and keeps {self.previous}, the change applies from the next turn"
                if self.running_turn_id else "; its next turns use it")
        return f"model of session {self.session_id}: {self.previous} → {self.model}{thinking} (recorded){when}"


def check_model(name: str | None, provider: str) -> str:
    """The name as recorded, or AppError (exit 2) saying what is wrong with it; nothing is recorded before."""
    model = (name or "").strip()
    if not model:
        raise AppError("the model name is empty; name one, e.g. `chronicle model SESSION claude-sonnet-5-5`", 2)
    check_model_name(model)
    kind = provider.split(":", 1)[0]
    if kind == "anthropic" and not model.startswith("claude-"):
        raise AppError(f"unknown model {model!r} for provider anthropic: Claude models are named claude-… "
                       "(e.g. claude-sonnet-5-5)", 2)
    return model


def check_model_name(model: str) -> None:
    """AppError (exit 2) for a name no provider spells so (a control character, markup, a space): a new session's
    model (`run --model`, `POST /sessions`, an Agent's or chronicle.toml's) as much as a change of one."""
    if not _NAME.fullmatch(model):
        raise AppError(f"not a model name: {model!r} (letters, digits and . _ : / @ + -, up to 200 characters)", 2)


def check_thinking(tokens: int | None, provider: str = "") -> int | None:
    """0 turns thinking off; otherwise a budget as CHRONICLE_THINKING_TOKENS takes (env_settings.in_thinking_range).
    A provider without a thinking budget (openai-compatible: the server decides on reasoning) is refused one, since
    it would be recorded and then never sent."""
    if tokens is None or tokens == 0:
        return tokens
    kind = provider.split(":", 1)[0]
    if kind in NO_THINKING_BUDGET:
        raise AppError(f"thinking tokens {tokens!r}: provider {kind} takes no thinking budget (the server decides on "
                       "reasoning), so it would be recorded and never sent; leave --thinking out, or use 0", 2)
    try:
        max_tokens = environment().max_tokens or DEFAULT_MAX_TOKENS
    except EnvironmentSettingError:
        max_tokens = DEFAULT_MAX_TOKENS
    try:
        return in_thinking_range(tokens, max_tokens, f"thinking tokens {tokens!r}", "or 0 for off")
    except SettingError as exc:
        raise AppError(str(exc), 2) from None


def unused_thinking_budget(provider: str) -> str | None:
    """The note for CHRONICLE_THINKING_TOKENS set where a session of a provider without a thinking budget runs.

    Unlike `--thinking N` (a choice for one session, recorded, so refused for such a session), the variable is
    the process's default for every session that records no budget of its own: a worker, a server or a shell
    profile runs Claude and openai-compatible sessions under the same environment, so refusing these would stop
    them for a setting meant for the others. It is said instead, once where the session's loop is built, rather
    than dropped without a word."""
    kind = provider.split(":", 1)[0]
    if kind not in NO_THINKING_BUDGET:
        return None
    try:
        budget = environment().thinking_tokens
    except EnvironmentSettingError:
        return None  # refused where the environment is checked, in its own words
    if budget is None or not budget.strip():
        return None
    return (f"note: CHRONICLE_THINKING_TOKENS={budget.strip()} ignored: provider {kind} takes no thinking budget "
            "(the server decides on reasoning); it applies to anthropic sessions only")


def current(store: ChronicleStore, ref: str | UUID) -> ModelChoice:
    sid = session_id(store, ref)
    session = store.session(sid)
    spec = session.spec
    choice = session.model_choice or {}
    return ModelChoice(sid, spec.model, spec.thinking_tokens, spec.provider, actor=choice.get("actor"), at=choice.get("at"),
                       running_turn_id=session.active_turn_id)


def change_model(store: ChronicleStore, ref: str | UUID, model: str | None, thinking_tokens: int | None = None, *,
                 actor: str | None = None, clock: Clock = SYSTEM_CLOCK) -> ModelChoice:
    """Record that the session runs on `model` from its next turn (None: keep the model, change the thinking budget).

    `thinking_tokens` None keeps the recorded budget. The same model and budget again records nothing
    (`changed` False). A bad name or budget raises AppError (exit 2) and records nothing."""
    sid = session_id(store, ref)
    recorded = store.session(sid).spec
    name = recorded.model if model is None else check_model(model, recorded.provider)
    budget = recorded.thinking_tokens if thinking_tokens is None else check_thinking(thinking_tokens, recorded.provider)
    who = recorded_actor(actor)
    outcome: dict[str, Any] = {}

    def command(session: Any) -> None:
        before = session.spec.model
        outcome["changed"] = session.change_model(name, clock.now(), thinking_tokens=budget, actor=who)
        outcome["previous"], outcome["running"] = before, session.active_turn_id

    try:
        store.update_session(sid, command)
    except DomainError as exc:
        raise AppError(str(exc), 2) from None
    now = current(store, sid)
    if not outcome.get("changed"):
        return now
    return ModelChoice(sid, now.model, now.thinking_tokens, now.provider, changed=True, previous=outcome["previous"],
                       actor=now.actor, at=now.at, running_turn_id=outcome["running"])
