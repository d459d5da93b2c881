"""Compaction inside one turn: a long autonomous turn must not grow until the provider refuses it.

Between two model calls of a turn (its tool results recorded, the next request not yet sent), the
context monitor estimates the next request. Past the threshold, the older turns are compacted
first (runtime/compaction.py, keeping none of them); if the request is still too large, the
running turn's own older steps are: whole steps (a response and its tool results), so no
tool_result is ever sent without its tool_use, and at least the last step stays verbatim. The
summary is an auxiliary model call, as for older turns; at the critical threshold the steps are
left out without one (nothing more to fail). `Turn.IterationsCompacted` records which steps the
summary stands for; the steps stay in the log, and every request built from the turn's events
(the next call, a resume, a later turn, a replay) reads the same compacted form. A summary that
fails records `Turn.IterationCompactionFailed` and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chronicle.domain.content import Message
from chronicle.domain.context import first_sent_step, input_message, merge_roles, step_messages, steps_note_messages

from .compaction import CompactionResult, reported_tokens
from .live import CompactionEvent, ErrorEvent
from .summary_request import ask_for_summary, summary_request

if TYPE_CHECKING:
    from chronicle.domain.turn import Turn

    from .compaction import Compactor
    from .loop_io import LoopIO
    from .request_context import RequestContext


def next_request_tokens(session: Any, turn: Turn, context: RequestContext, reported: bool = True) -> int:
    """The next request's size: its messages by characters / 4 (as `compaction.estimate_tokens`), or
    what the last response reported (its input plus its output, which the next request carries),
    whichever is larger. `reported=False` just after a compaction: that usage is of the longer request."""
    estimate = (context.size(turn) + len(session.spec.system_prompt)) // 4
    if not reported:
        return estimate
    return max(estimate, reported_tokens(turn.steps[-1]["response"].get("usage") or {}) if turn.steps else 0)


async def between_iterations(compactor: Compactor, io: LoopIO, session: Any, turn: Turn, context: RequestContext) -> str | None:
    """Compact before the turn's next model call if the request would be near the window.

    Returns what changed: "turns" (older turns: the prior context is to be built again), "steps"
    (the turn's own steps; the turn object was updated and saved), or None."""
    if not compactor.settings.auto or not turn.steps:
        return None
    model = session.spec_for(turn.id).model  # the model this turn asks: its window is the one that counts
    strategy = compactor.monitor.suggest(next_request_tokens(session, turn, context), model)
    if strategy is None:
        return None
    changed: str | None = None
    if [t for t in session.context_view()[1] if t != turn.id]:
        result = await compactor.compact(io, session.id, strategy=strategy, keep_recent=0)
        if result.ok:
            changed = "turns"
            from .request_context import RequestContext

            session = io.store.session(session.id)
            context = RequestContext(prior_messages(io.store, session, turn))
            strategy = compactor.monitor.suggest(next_request_tokens(session, turn, context, reported=False), model)
            if strategy is None:
                return changed
    done = await compact_steps(compactor, io, session, turn, strategy)
    return "steps" if done.ok else changed


async def for_retry(compactor: Compactor, io: LoopIO, session_id: Any, turn: Turn) -> bool:
    """After "prompt too long": compact the older turns; when none is left to compact, the turn's own steps."""
    result = await compactor.compact(io, session_id, strategy="summary", keep_recent=0)
    if result.ok:
        return True
    if turn.open_step is not None or len(turn.steps) < 2:
        return False
    session = io.store.session(session_id)
    return (await compact_steps(compactor, io, session, turn, "summary", keep=1)).ok


def steps_to_compact(compactor: Compactor, turn: Turn, keep: int | None = None) -> int:
    """Up to which step (exclusive) to compact: all but the last `keep` (at least one) steps, or 0
    when that covers no step not compacted already."""
    keep = max(1, compactor.settings.keep_recent if keep is None else keep)
    through = len(turn.steps) - keep
    if through <= first_sent_step(turn) and keep > 1:
        through = len(turn.steps) - 1  # the turn is long in few steps: keep only the last
    return through if through > first_sent_step(turn) else 0


async def compact_steps(
    compactor: Compactor, io: LoopIO, session: Any, turn: Turn, strategy: str, keep: int | None = None
) -> CompactionResult:
    """Replace the turn's older steps by a summary (or leave them out: "truncate"), on the turn the loop
    drives (it is saved here, so the loop's next save of it follows on)."""
    through = steps_to_compact(compactor, turn, keep)
    if not through or turn.open_step is not None or turn.finished:
        return CompactionResult(False, strategy, reason=f"nothing to compact in turn {turn.number}: {len(turn.steps)} step(s)")
    sid = str(session.id)
    spec = session.spec_for(turn.id)
    usage: dict[str, Any] = {}
    model = spec.auxiliary_model(spec.model)  # the summary's model, as for older turns (runtime/compaction.py)
    text: str | None = None
    if strategy == "summary":
        messages = [input_message(turn), *steps_note_messages(turn)]
        for step in turn.steps[first_sent_step(turn):through]:
            messages.extend(step_messages(step))
        request = summary_request(
            merge_roles(messages), model=model, agent=spec.name, session_id=sid, turn_number=turn.number,
            # the next summary of the session, as the scripted provider counts them (older turns' first)
            call_index=session.compaction_attempts + turn.iteration_compaction_attempts,
        )
        answer = await ask_for_summary(io.provider, request)
        usage, model = answer.usage, answer.model
        if answer.text is None:
            reason = f"summary of turn {turn.number}'s steps failed: {answer.failure}"
            turn.record_iteration_compaction_failure(reason, strategy, io.clock.now(), usage=usage, model=model)
            io.save(turn)
            await io.emit(ErrorEvent(session_id=sid, turn_id=str(turn.id), message=f"compaction {reason}; context left unchanged", kind="compaction"))
            return CompactionResult(False, strategy, reason=reason)
        from .secret_scan import scanner_for  # the summary is model text: scanned like any other before it is recorded

        found = scanner_for(io.workspace).text(answer.text)
        text = found.value
        turn.note_redactions("compaction summary", found.counts, io.clock.now())
    elif strategy != "truncate":
        raise ValueError(f"a turn's steps are compacted by summary or truncate, not {strategy!r}")
    turn.compact_iterations(through, text, strategy, io.clock.now(), usage=usage, model=model)
    io.save(turn)
    await io.emit(CompactionEvent(session_id=sid, strategy=strategy, turns_compacted=0, summary=text, turn_id=str(turn.id),
                                  steps_compacted=through))
    return CompactionResult(True, strategy, summary=text)


def prior_messages(store: Any, session: Any, turn: Any) -> list[Message]:
    """The messages before the turn's own: the session's summary and the other turns in view."""
    from .effects import prior_context
    from .turn_messages import context_of

    summary, view = session.context_view()
    prior_ids = [t for t in view if t != turn.id]
    if session.spec.trim_tool_results_after_turns:
        return prior_context(store, session.spec, prior_ids, summary)  # older tool results trimmed (effects)
    return context_of(store, prior_ids, summary=summary)
