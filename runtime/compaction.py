"""Compaction: keep what the model reads inside its context window; keep the log whole.

A context monitor estimates the tokens of the next request (chars / 4, or the usage the
last response reported, whichever is larger). At the summary threshold the older turns are
summarised by an auxiliary model call; at the critical threshold they are truncated (no model
call, nothing more to fail). Either way a `Compacted` event on the Session says which turns
the summary replaces; the turns themselves stay in the log. A summary that fails records
`CompactionFailed` and changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from chronicle.domain.content import Message, TextBlock
from chronicle.domain.context import build_context

from .live import CompactionEvent, ErrorEvent
from .summary_request import SUMMARY_PROMPT as SUMMARY_PROMPT  # importers found them here
from .summary_request import SUMMARY_SYSTEM as SUMMARY_SYSTEM
from .summary_request import ask_for_summary, summary_request
from .turn_messages import context_of

if TYPE_CHECKING:
    from .loop_io import LoopIO

DEFAULT_WINDOW = 100_000
CONTEXT_WINDOWS = {"claude": 200_000}

@dataclass(frozen=True)
class CompactionSettings:
    threshold: float = 0.80
    critical: float = 0.95
    keep_recent: int = 2
    context_window: int | None = None
    auto: bool = True


@dataclass(frozen=True)
class CompactionResult:
    ok: bool
    strategy: str
    turns_compacted: int = 0
    summary: str | None = None
    reason: str = ""
    #: Not compacted, and recorded as `CompactionFailed` (a summary that failed, a branch changed meanwhile): exit 1,
    #: where "nothing to compact" is an answer, exit 0.
    failed: bool = False

    def row(self, session_id: UUID) -> dict[str, Any]:
        """`compact --json`, for the CLI, the library and the server alike."""
        return {"session_id": str(session_id), "ok": self.ok, "strategy": self.strategy, "turns_compacted": self.turns_compacted,
                "summary": self.summary, "reason": self.reason or None}


def reported_tokens(usage: dict[str, Any]) -> int:
    """What a response's usage says its request and answer took: the next request carries both."""
    return sum(int(usage.get(k) or 0) for k in (
        "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))


def estimate_tokens(messages: list[Message], system: str = "") -> int:
    chars = len(system) + sum(len(json.dumps(m.wire(), ensure_ascii=False)) for m in messages)
    return chars // 4


class ContextMonitor:
    def __init__(self, settings: CompactionSettings) -> None:
        self.settings = settings

    def window(self, model: str) -> int:
        if self.settings.context_window:
            return self.settings.context_window
        for prefix, size in CONTEXT_WINDOWS.items():
            if model.startswith(prefix):
                return size
        return DEFAULT_WINDOW

    def suggest(self, tokens: int, model: str) -> str | None:
        ratio = tokens / self.window(model)
        if ratio >= self.settings.critical:
            return "truncate"
        if ratio >= self.settings.threshold:
            return "summary"
        return None


class Compactor:
    def __init__(self, settings: CompactionSettings | None = None) -> None:
        self.settings = settings or CompactionSettings()
        self.monitor = ContextMonitor(self.settings)

    def estimate(self, io: LoopIO, session: Any, extra_text: str = "") -> int:
        """The larger of the next request's estimated size and the newest model call's reported input.

        The messages come from the process's cache of ended turns' messages (runtime/turn_messages.py), which
        the run's context reads too: reading every turn on the branch here made each turn of a long session
        decode all earlier turns' events again (0.36 s at 1,000 turns). Only the newest turns are read, back
        to the first with a model call, for what that call reported."""
        summary, view = session.context_view()
        messages = context_of(io.store, view, summary=summary)
        if extra_text:
            messages.append(Message(role="user", content=[TextBlock(text=extra_text)]))
        estimate = estimate_tokens(messages, session.spec.system_prompt)
        reported = 0
        for turn_id in reversed(view):
            turn = io.store.turn(turn_id)
            if turn.steps:
                reported = reported_tokens(turn.steps[-1]["response"].get("usage") or {})
                break
        return max(estimate, reported)

    async def maybe_compact(self, io: LoopIO, session: Any) -> CompactionResult | None:
        """Before a turn starts: compact if the next request would be near the window."""
        if not self.settings.auto:
            return None
        item = session.next_input
        tokens = self.estimate(io, session, item["text"] if item else "")
        # the model the next turn asks: a recorded change's (`chronicle model`), whose window may differ
        strategy = self.monitor.suggest(tokens, session.current_model or session.spec.model)
        if strategy is None:
            return None
        return await self.compact(io, session.id, strategy=strategy)

    async def compact(
        self, io: LoopIO, session_id: UUID, strategy: str = "summary", keep_recent: int | None = None
    ) -> CompactionResult:
        """Compact through the loop's I/O (store, provider, clock, live events), never the loop itself."""
        store = io.store
        session = store.session(session_id)
        summary, view = session.context_view()
        view = [t for t in view if t != session.active_turn_id]
        keep = self.settings.keep_recent if keep_recent is None else keep_recent
        chosen = view[: max(0, len(view) - keep)]
        if not chosen:
            return CompactionResult(False, strategy, reason=f"nothing to compact: {len(view)} turn(s) in context, keeping {keep}")
        already = session.head[: len(session.head) - len(session.context_view()[1])]
        spec = session.spec
        model = spec.auxiliary_model(spec.model)  # the summary's model: the recorded auxiliary one, else the main one
        usage: dict[str, Any] = {}
        text = summary
        moved = None  # the workspace strategy's block, taken back if the compaction is refused
        if strategy == "summary":
            request = summary_request(build_context(store.turns(chosen), summary=summary), model=model, agent=spec.name,
                                      session_id=str(session_id), call_index=session.compaction_attempts)
            answer = await ask_for_summary(io.provider, request)
            usage, model = answer.usage, answer.model
            if answer.text is None:
                reason = f"summary failed: {answer.failure}"
                now = io.clock.now()
                store.update_session(session_id, lambda s: s.record_compaction_failure(reason, strategy, now, usage=usage, model=model))
                await io.emit(ErrorEvent(session_id=str(session_id), message=f"compaction {reason}; history left unchanged", kind="compaction"))
                return CompactionResult(False, strategy, reason=reason, failed=True)
            from .workspace_log import with_pointers

            text = with_pointers(answer.text, summary)
        elif strategy == "workspace":
            from .workspace_log import append_turns, moved_note, take_back

            if not io.workspace.is_dir():
                return CompactionResult(False, strategy, reason=f"workspace {io.workspace} is gone; nothing was moved")
            turns = store.turns(chosen)
            moved = append_turns(io.workspace, session_id, turns, io.clock.now())
            # The file holds only the turns moved now: the text says which, and what stands for the earlier ones.
            text = moved_note(moved.relative, [t.number for t in turns], len(already), summary)
        elif strategy != "truncate":
            raise ValueError(f"unknown compaction strategy {strategy!r}: use summary, truncate or workspace")
        now = io.clock.now()
        turn_ids = [*already, *chosen]
        from .secret_scan import scanner_for  # the summary is model text: scanned like any other before it is recorded

        found = scanner_for(io.workspace).text(text) if text is not None else None
        text = found.value if found is not None else None

        stale: list[str] = []

        def record(s: Any) -> None:
            stale.clear()  # a retry on a fresh copy decides again
            if s.head[: len(turn_ids)] != turn_ids or s.active_turn_id in turn_ids:
                # Another process undid, redid or compacted these turns while this one summarised them: the summary
                # no longer describes the branch. Its call (paid) is recorded as a failure; the history is left as is.
                stale.append("the branch changed while it was compacted (undo, redo or another compaction); nothing "
                             "compacted, run compact again")
                s.record_compaction_failure(stale[-1], strategy, now, usage=usage, model=model)
                return
            s.compact(turn_ids, text, strategy, now, usage=usage, model=model)
            if found is not None:
                s.note_redactions("compaction summary", found.counts, now)

        try:
            store.update_session(session_id, record)
        except Exception:
            if moved is not None and not _recorded(store, session_id, now):
                take_back(io.workspace, moved)
            raise
        if stale:
            if moved is not None:
                take_back(io.workspace, moved)
            await io.emit(ErrorEvent(session_id=str(session_id), message=f"compaction failed: {stale[-1]}", kind="compaction"))
            return CompactionResult(False, strategy, reason=stale[-1], failed=True)
        await io.emit(CompactionEvent(session_id=str(session_id), strategy=strategy, turns_compacted=len(chosen), summary=text))
        return CompactionResult(True, strategy, turns_compacted=len(chosen), summary=text)

    async def between_iterations(self, io: LoopIO, session: Any, turn: Any, context: Any) -> bool:
        """Inside a turn, before its next model call: compact if the request would be near the window
        (runtime/turn_compaction.py). True when what the model reads changed."""
        from .turn_compaction import between_iterations

        return await between_iterations(self, io, session, turn, context) is not None

    async def for_retry(self, io: LoopIO, session_id: UUID, turn: Any) -> bool:
        """After "prompt too long": older turns, else the running turn's own older steps."""
        from .turn_compaction import for_retry

        return await for_retry(self, io, session_id, turn)


def _recorded(store: Any, session_id: UUID, now: Any) -> bool:
    """Whether this compaction's `Compacted` is on the session although its write raised; True when the
    store cannot say (it is gone): a block written twice is harmless, turns missing from the file are not."""
    try:
        done = store.session(session_id).compaction
    except Exception:  # noqa: BLE001 - the store's own failure is what the caller raises
        return True
    return bool(done) and done.get("at") == now.isoformat()
