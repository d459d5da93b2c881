"""The agent loop over the event store: model call, tool calls, repeat, every step an event.

`run_next` either continues the session's turn in flight (after a crash, an approval, a
restart) or starts its oldest queued input. All that the model reads is rebuilt from the
turns recorded for the session, so a fresh process continues exactly where a dead one stopped.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import Message
from chronicle.domain.errors import DomainError
from chronicle.domain.ids import tool_call_id, tool_call_ids
from chronicle.domain.ids import turn_id as make_turn_id
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .actor import process_actor
from .attachments import result_images
from .clock import SYSTEM_CLOCK, Clock
from .guardrails import with_own_checks
from .hooks import Checked, Hooks
from .live import ApprovalNeeded, Broker, ErrorEvent, ProgressEvent, StatusChange, TurnEnd, TurnStart, UsageEvent
from .loop_io import ControlPort, LoopIO, LoopOptions
from .middleware import Around, MiddlewareFailure, Run, chain, recorded_middleware
from .model_call import (
    CONTEXT_WINDOW_FULL,
    ModelCaller,
    completion_note,
    not_run_reason,
    request_delta,
    runs_no_tools,
    unfinished_outcome,
    window_full_reason,
)
from .pricing import price
from .process_stop import stopped_by_process
from .progress import progress_of
from .providers.base import ModelRequest, Provider
from .request_context import RequestContext
from .response_checks import as_failure, unrecordable
from .secret_scan import scan_response, scanner_for
from .shred_marks import ForgottenContent
from .store import TURN_ATTEMPTS, ChronicleStore
from .tool_runner import ApprovalWait, Approver, GuardStop, ToolRunner
from .tools.base import Toolbox
from .toolsets import agent_toolbox
from .turn_compaction import prior_messages
from .turn_outcome import (
    TurnOutcome,
    cancel_calls,
    cancel_pending,
    cancel_turn,
    cancelled_in_flight,
    crashed,
    finish,
    forgotten_under,
    left_in_flight,
    middleware_failed,
    stop_turn,
    tools_ended,
)
from .user_hooks import with_own_hooks

DEFAULT_MAX_TOKENS = 8192
#: How the retry that compacts after a response filled the model's context window begins its reason.
WINDOW_FULL_RETRY = "context_window_full"


def _part(name: str) -> Any:
    return property(lambda self: getattr(self.io, name), lambda self, value: setattr(self.io, name, value))


class AgentLoop:
    def __init__(
        self,
        store: ChronicleStore,
        provider: Provider,
        toolbox: Toolbox,
        workspace: Path,
        broker: Broker | None = None,
        options: LoopOptions | None = None,
        clock: Clock = SYSTEM_CLOCK,
        approver: Approver | None = None,
        hooks: Hooks | None = None,
        compactor: Any = None,
        controls: ControlPort | None = None,
        middleware: list[tuple[str, Around]] | None = None,
    ) -> None:
        if controls is None:
            from .control_port import StoreControls  # the default port; the application hands its own

            controls = StoreControls(store)
        #: Everything the collaborators below may use; none of them gets the loop itself.
        self.io = LoopIO(
            store=store, provider=provider, toolbox=toolbox, workspace=workspace, options=options or LoopOptions(),
            controls=controls, clock=clock, broker=broker or Broker(), hooks=hooks or Hooks(), approver=approver,
            compactor=compactor, spawn=self._spawn,
        )
        self.caller = ModelCaller(self.io)
        self.tools = ToolRunner(self.io)
        self._context = RequestContext([])
        self._opened: dict[UUID, ToolCall] = {}
        self._settled: dict[UUID, str] = {}  # the statuses of the last step's calls, for the progress count
        #: Wrappers around each run of a turn (runtime/middleware.py), the first outermost. A sub-agent's
        #: runs are wrapped in its own only: they run inside its parent's run, already wrapped.
        self.middleware = list(middleware or [])
        self._driving: Turn | None = None
        self._interrupted: MiddlewareFailure | None = None
        #: The running turn's cancel watcher: its `reason` is what the cancel request said.
        self._cancel_watcher: Any = None
        #: Said with a completed turn whose answer the full context window cut (see `_window_full`).
        self._window_note: str | None = None

    # The bundle's parts, for the loop's own code and its builders (reading or replacing one acts on the bundle).
    store = _part("store")
    provider = _part("provider")
    toolbox = _part("toolbox")
    workspace = _part("workspace")
    broker = _part("broker")
    options = _part("options")
    clock = _part("clock")
    hooks = _part("hooks")
    compactor = _part("compactor")
    controls = _part("controls")
    approver = _part("approver")

    async def emit(self, event: Any) -> None:
        await self.io.emit(event)

    def save(self, *aggregates: Any, rerunnable: bool = False) -> None:
        """`rerunnable`: what this commit records is done again by a resume if it is lost (see
        `ChronicleStore.save`), so it need not wait for the disk."""
        self.io.save(*aggregates, rerunnable=rerunnable)

    def _spawn(self, spec: AgentSpec) -> "AgentLoop":
        """A sub-agent's loop: this loop's store, provider, workspace, broker, clock, approver, hooks
        (guards, guardrails and the user's hooks included), compactor and controls; from its spec, its own
        toolbox, max_iterations, guardrails and hooks (after this loop's) and middleware (around its runs,
        which run inside this loop's run). A path of its spec whose tool was deleted or renamed since the session
        started is left out: said when this loop was built (app/vanished_tools.py), as a list that lost a tool."""
        io, options = self.io, self.io.options
        return AgentLoop(
            io.store, io.provider, agent_toolbox(spec, io.workspace, []), io.workspace, broker=io.broker, clock=io.clock, approver=io.approver,
            hooks=with_own_hooks(with_own_checks(io.hooks, spec.guardrails, io.workspace), spec.hooks, io.workspace),
            compactor=io.compactor, controls=io.controls,
            options=LoopOptions(
                max_iterations=None, auto_approve=options.auto_approve, tool_timeout_s=options.tool_timeout_s,
                max_tokens=options.max_tokens, retry=options.retry,
            ),
            middleware=recorded_middleware(spec.middleware, io.workspace),
        )

    # -- entry points --------------------------------------------------------------------------

    async def run_next(self, session_id: UUID) -> TurnOutcome | None:
        """Continue the turn in flight, or start the oldest queued input; None when idle and empty."""
        begun = False  # by this call, just now (not a turn found in flight)
        found_cancel: str | None = None  # a cancel recorded for the turn found in flight while no process ran it
        try:
            session = self.store.session(session_id)
            if session.active_turn_id is not None:
                turn = self.store.turn(session.active_turn_id)
                if turn.finished:
                    # Finished by another writer (cancel, guard) before the session heard of it.
                    now = self.clock.now()
                    self.store.update_session(session.id, lambda s: s.end_turn(turn.id, now), attempts=TURN_ATTEMPTS)
                    return TurnOutcome(session.id, turn.id, turn.status, text=turn.final_text or "", reason=turn.reason,
                                       input_id=turn.input_id)
                found_cancel = cancel_pending(session, turn.id)
                self._reopen(turn, resume=found_cancel is None)
            elif session.next_input is not None:
                if self.compactor is not None:
                    await self.compactor.maybe_compact(self.io, session)
                    session = self.store.session(session_id)  # compaction may have changed it
                try:
                    turn, session = self._begin_turn(session)
                    begun = True
                except DomainError:
                    return None  # another process started that input first; it drains the queue
            else:
                return None
        except PersistenceError as exc:
            # The commit may even have happened with only its acknowledgement lost: resume sorts it out.
            outcome = left_in_flight(session_id, None, exc, self.store.url)
            await self.emit(ErrorEvent(session_id=str(session_id), message=outcome.reason or "", kind=outcome.status))
            return outcome
        except ForgottenContent as exc:  # forgotten by another process since this one last read it
            return await forgotten_under(self.io, session_id, None, exc)
        await self.emit(TurnStart(session_id=str(session.id), turn_id=str(turn.id), number=turn.number, input=turn.input_text,
                                 input_id=turn.input_id))
        await self.emit(StatusChange(session_id=str(session.id), status="busy"))
        task = asyncio.current_task()
        watcher = None
        if found_cancel is None and task is not None:
            watcher = self.controls.watch_cancel(session.id, turn.id, task, just_started=begun)
        self._cancel_watcher = watcher
        if watcher is not None:
            watcher.start()
        try:
            if found_cancel is not None:
                outcome = await cancelled_in_flight(self.io, session, turn, found_cancel)
            else:
                try:
                    outcome = await self._run(session, turn, task)
                finally:
                    if watcher is not None:
                        await watcher.stop()
        except asyncio.CancelledError as exc:
            if stopped_by_process(exc) is not None:  # the process stops (Worker.run's crash): nobody cancelled this turn
                raise
            if task is not None:
                task.uncancel()
            if self._interrupted is not None:  # a middleware stopped the run (a timeout): the turn fails
                outcome = await middleware_failed(self.io, session, turn, self._interrupted)
            else:
                reason = self.tools.interrupted or (watcher.reason if watcher else None) or "cancelled by the user"
                outcome = await cancel_turn(self.io, session, turn, reason)
                if watcher is not None and watcher.reason:  # a cancel request: its asker may be waiting
                    watcher.honoured()
        except MiddlewareFailure as failure:
            outcome = await middleware_failed(self.io, session, turn, failure)
        except Exception as exc:
            outcome = await crashed(self.io, session, turn, exc)
        await self.emit(
            TurnEnd(session_id=str(session.id), turn_id=str(turn.id), status=outcome.status, text=outcome.text or None, reason=outcome.reason)
        )
        await self.emit(StatusChange(session_id=str(session.id), status="idle"))
        return outcome

    def _next_turn_number(self, session: Session) -> int:
        """One numbering everywhere (scripts, audit, `history --at`, `fork --at`): a fork's inherited
        turns come first, then every turn the session ran, undone ones included."""
        inherited = len(self.store.first_head(session.id)) if session.forked_from else 0
        return inherited + len(session.turns) + 1

    def _begin_turn(self, session: Session) -> tuple[Turn, Session]:
        """Start the oldest queued input; the session write is retried on a fresh copy if it races.
        The session comes back as that write saved it: the loop goes on from that state instead of
        reading the session again (a query and a copy, each time)."""
        now = self.clock.now()
        item = session.next_input
        assert item is not None
        tid = make_turn_id(session.id, item["input_id"])
        turn = Turn(
            id=tid, session_id=session.id, input_id=item["input_id"], number=self._next_turn_number(session),
            input_text=item["text"], agent=session.spec.name, timestamp=now,
        )
        if item.get("attachments"):
            turn.reference_attachments(item["attachments"], now)
        turn.start(now)

        def start(fresh: Session) -> None:
            if fresh.next_input is None or fresh.next_input["input_id"] != item["input_id"]:
                raise DomainError(f"input {item['input_id']} was started by another process")
            fresh.start_turn(tid, now)

        return turn, self.store.update_session(session.id, start, turn, held=session, attempts=TURN_ATTEMPTS)

    def _reopen(self, turn: Turn, resume: bool = True) -> None:
        """A turn found in flight: record that it was interrupted, then continue it (unless `resume` is False:
        a cancel recorded meanwhile ends it instead)."""
        now = self.clock.now()
        if turn.status == "running":
            turn.interrupt("found in flight: the process running it stopped", now)
        if resume and turn.status == "pending":
            turn.start(now)
        elif resume and turn.status in ("interrupted", "awaiting_approval"):
            turn.resume("resumed", now, actor=process_actor())
        self.save(turn)

    # -- middleware around the run (runtime/middleware.py) -------------------------------------

    async def _run(self, session: Session, turn: Turn, task: asyncio.Task | None) -> TurnOutcome:
        """Drive the turn inside the middleware; an error inside the run is the turn's failure before
        any middleware sees it (the seed's Recovery), so a middleware only ever gets an outcome."""
        self._interrupted = None
        self.tools.interrupted = None
        if not self.middleware:
            return await self._drive(session, turn)

        over = False  # has the run ended (driven to its end, or failed by a middleware)?

        async def innermost() -> TurnOutcome:
            nonlocal over
            self._driving = turn
            try:
                return await self._drive(session, turn)
            except asyncio.CancelledError:
                if self._interrupted is None or task is None:
                    raise  # the user's cancel: run_next records it
                task.uncancel()
                return await middleware_failed(self.io, session, turn, self._interrupted)
            except Exception as exc:  # noqa: BLE001 - recorded as the turn's failure, as run_next would
                return await crashed(self.io, session, turn, exc)
            finally:
                self._driving, over = None, True

        def record(mark: dict[str, Any]) -> None:
            # Before and during the run, the turn object the loop drives (a copy would collide with its
            # next save); after it, the stored turn (the run may have ended it on a fresh copy).
            live = self.store.turn(turn.id) if over else turn
            live.record_middleware(mark, self.clock.now())
            self.save(live)

        def interrupt(name: str, reason: str, kind: str) -> bool:
            if self._driving is None or task is None or self._interrupted is not None:
                return False
            self._interrupted = MiddlewareFailure(name, reason, kind)
            task.cancel()
            return True

        def make_run(name: str) -> Run:
            return Run(name=name, session_id=session.id, turn_id=turn.id, number=turn.number, agent=session.spec.name,
                       input=turn.input_text, _record=record, _interrupt=interrupt)

        async def fail(failure: MiddlewareFailure) -> TurnOutcome:
            nonlocal over
            over = True
            return await middleware_failed(self.io, session, turn, failure)

        outcome: TurnOutcome = await chain(self.middleware, make_run, innermost, fail)()
        return outcome

    def _call_status(self, call_id: UUID) -> str:
        """A tool call's status for the progress count. The step the count closes is the one this loop
        just ran, so its calls are in hand (a read each was two transactions a step on PostgreSQL);
        only a step a resumed turn inherited is read."""
        call = self._opened.get(call_id)
        if call is not None:
            return call.status
        return self._settled.get(call_id) or self.store.tool_call(call_id).status

    def _cancel_reason(self) -> str:
        """Why a cancelled model call or tool was cancelled: a middleware's interruption, else what the
        cancel request said (as the turn's end says it), else the user (Ctrl-C in this process)."""
        if self._interrupted is not None:
            return str(self._interrupted)
        return (self.tools.interrupted or getattr(self._cancel_watcher, "reason", None)
                or stopped_by_process(sys.exception()) or "cancelled by the user")

    # -- the loop ------------------------------------------------------------------------------

    async def _drive(self, session: Session, turn: Turn) -> TurnOutcome:
        spec = session.spec_for(turn.id)  # a model change made while this turn ran applies from the next one
        prior = self._prior_context(session, turn)
        self._context = RequestContext(prior)
        self._opened, self._settled = {}, {}
        self._window_note = None
        max_iterations = self.options.max_iterations or spec.max_iterations
        if not turn.steps and not turn.inbound_checked:
            checked = await self.hooks.check_inbound(session, turn, turn.input_text)
            self._mark(turn, checked)  # saved with the first model response (or the stop): re-run if neither is
            if checked.stop is not None:
                return await stop_turn(self.io, session, turn, checked.stop)
        while True:
            if turn.open_step is not None:
                waiting = await self._resolve_step(session, turn)
                if waiting is not None:
                    return waiting
                continue
            last = turn.last_response
            if last is not None and not last.tool_uses and last.finished and last.stop_reason != "pause_turn":
                # pause_turn: a long server-side tool paused the answer; sending it back continues it.
                checked = await self.hooks.check_final(session, turn, last.text)
                self._mark(turn, checked)  # saved with the turn's end, in one transaction
                rejected = checked.stop or await self.hooks.before_finish(session, turn, last)
                if rejected is not None:  # an output guardrail or a hook: the turn fails with the check's message
                    return finish(self.io, session, turn, "failed", rejected.reason, error=rejected.error or {"guardrail": rejected.guard})
                return finish(self.io, session, turn, "completed", self._window_note or completion_note(last))
            if last is not None and self._ended_by_tool(turn):
                return finish(self.io, session, turn, "completed")
            if turn.model_calls >= max_iterations:
                reason = f"max_iterations reached: {turn.model_calls} model call(s) without a final answer"
                return finish(self.io, session, turn, "failed", reason)
            if self.compactor is not None and await self.compactor.between_iterations(self.io, session, turn, self._context):
                session = self.store.session(session.id)  # the turn's steps or older turns were compacted
                self._context = RequestContext(self._prior_context(session, turn))
            request = ModelRequest(
                model=spec.model, system=spec.system_prompt, messages=self._context.messages(turn), thinking_tokens=spec.thinking_tokens,
                tools=self.toolbox.schemas(), max_tokens=self.options.max_tokens or DEFAULT_MAX_TOKENS, agent=spec.name,
                session_id=str(session.id), turn_number=turn.number, call_index=turn.model_calls,
            )
            verdict = await self.hooks.before_model_call(session, turn, request)
            if verdict is not None:
                return await stop_turn(self.io, session, turn, verdict)
            try:
                response, attempts, latency_ms = await self.caller.call(turn, request)
            except asyncio.CancelledError:
                self._record_response(turn, self.caller.aborted_response(spec.model), request, 1, 0.0)
                raise
            problem = unrecordable(response)
            if problem is not None:
                response = as_failure(response, problem)
            if await self._compacted_for_retry(session, turn, response, attempts):
                session = self.store.session(session.id)
                prior = self._prior_context(session, turn)
                self._context = RequestContext(prior)
                continue
            step = self._record_response(turn, response, request, attempts, latency_ms)
            await self.hooks.after_model_call(session, turn, response)
            model = response.model or spec.model
            await self.emit(
                UsageEvent(session_id=str(session.id), turn_id=str(turn.id), step=step, model=model, usage=response.usage.model_dump(),
                           usd=price(model, response.usage, at=self.clock.now()))
            )
            # Calls recorded as failed without running (a response cut at max_tokens, a refusal) end here.
            await tools_ended(self.io, [call for call in self._opened.values() if call.resolved])
            await self.emit(ProgressEvent(session_id=str(session.id), **progress_of(turn, max_iterations, status_of=self._call_status)))
            if response.stop_reason == "error":
                error = response.error
                message = f"model call failed: {error.message if error else 'unknown error'}"
                await self.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=message, kind=error.kind if error else "error"))
                return finish(self.io, session, turn, "failed", message, error=error.model_dump() if error else None)
            unfinished = unfinished_outcome(response)
            if unfinished is not None:
                reason, error_data = unfinished
                await self.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=reason, kind=error_data["kind"]))
                return finish(self.io, session, turn, "failed", reason, error=error_data)
            if response.provider_stop_reason == CONTEXT_WINDOW_FULL:
                ended = await self._window_full(session, turn, response, attempts)
                if ended is not None:
                    return ended
                session = self.store.session(session.id)  # older turns (or the turn's own steps) were compacted
                self._context = RequestContext(self._prior_context(session, turn))

    async def _window_full(self, session: Session, turn: Turn, response: Any, attempts: int) -> TurnOutcome | None:
        """The model filled its context window while answering (`model_context_window_exceeded`); the
        response is recorded, its tool calls failed without running (their results could not be read).

        Asking again as it stands would hit the same full window on every call until max_iterations.
        So, as after "prompt too long": compact the older turns (else the turn's own older steps) and
        go on once; a window still full after that, or nothing left to compact, fails the turn saying
        what to do. A text answer the window cut ends the turn as before (completed, with a note);
        the older turns are compacted first where they can be, so that the next turn fits.
        """
        now = self.clock.now()
        if not response.tool_uses:
            compacted = self.compactor is not None and bool(await self.compactor.for_retry(self.io, session.id, turn))
            room = ("older turns were compacted to make room: ask again for the rest" if compacted
                    else "to go on, run `chronicle compact SESSION` or use a model with a larger context window")
            self._window_note = (
                f"the answer was cut because the model's context window is full ({CONTEXT_WINDOW_FULL}): "
                f"it may be incomplete; {room}"
            )
            return None
        done: bool | None = None  # automatic compaction off
        if self.compactor is not None:
            done = any(r["reason"].startswith(WINDOW_FULL_RETRY) for r in turn.retries)
            if not done:
                turn.record_retry(
                    attempt=attempts, delay_s=0.0, now=now,
                    reason=f"{WINDOW_FULL_RETRY}: the model's context window filled while it answered; compacting older turns and going on once",
                )
                self.save(turn)
                if await self.compactor.for_retry(self.io, session.id, turn):
                    return None
        reason = window_full_reason(response, done)
        ids = [b.id for b in response.tool_uses]
        await self.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=reason, kind=WINDOW_FULL_RETRY))
        return finish(self.io, session, turn, "failed", reason, error={"kind": WINDOW_FULL_RETRY, "tool_use_ids": ids})

    def _mark(self, turn: Turn, checked: Checked) -> None:
        """Record each check that changed the inbound message or final answer, or failed open."""
        now = self.clock.now()
        for mark, text in checked.marks:
            turn.record_guardrail(mark, text, now)

    def _ended_by_tool(self, turn: Turn) -> bool:
        """Did a tool of the last step (task_complete) finish the turn? Read from the recorded calls,
        so a process resumed after that result was stored ends the turn without another model call."""
        step = turn.steps[-1]
        uses = [b for b in step["response"].get("content", []) if b.get("type") == "tool_use"]
        candidates = [b for b in uses if getattr(self.toolbox.get(b["name"]), "may_end_turn", False)]
        return any(
            call is not None and call.status == "completed" and call.ends_turn
            for call in (self.store.find_tool_call(tool_call_id(turn.id, step["step"], b["id"])) for b in candidates)
        )

    def _record_response(self, turn: Turn, response: Any, request: ModelRequest, attempts: int, latency_ms: float) -> int:
        """Record the response and open its tool calls in one transaction, secrets cut out first
        (runtime/secret_scan.py): the tools run, and the next request sends, what was recorded."""
        now = self.clock.now()
        response, redacted = scan_response(response, scanner_for(self.workspace))
        step = turn.record_response(
            response, now, fingerprint=self._context.fingerprint_of(request), request_delta=request_delta(request),
            latency_ms=round(latency_ms, 3), attempts=attempts,
        )
        turn.note_redactions(f"response step {step}", redacted, now)
        calls = []
        if turn.open_step is not None:
            for block in response.tool_uses:
                tool = self.toolbox.get(block.name)
                call = ToolCall(
                    id=tool_call_id(turn.id, step, block.id), session_id=turn.session_id, turn_id=turn.id, step=step,
                    tool_use_id=block.id, name=block.name, input=block.input,
                    flags=tool.flags() if tool else {}, timestamp=now,
                )
                not_run = not_run_reason(response, block)
                if not_run is not None:
                    call.fail(not_run, now)
                calls.append(call)
            if runs_no_tools(response):
                turn.close_step(calls, now)
        # Re-runnable: a call that must not run twice commits, flushed, before it runs, and that
        # flushes this response with it.
        self.save(turn, *calls, rerunnable=True)
        # Saved: the step's tool calls are exactly as a reload would give them, so skip the reload.
        self._opened = {call.id: call for call in calls}
        return step

    async def _resolve_step(self, session: Session, turn: Turn) -> TurnOutcome | None:
        step = turn.open_step
        assert step is not None
        ids = tool_call_ids(turn.id, [step])
        opened, self._opened = self._opened, {}
        calls = [opened.get(cid) or self.store.tool_call(cid) for cid in ids]
        now = self.clock.now()
        for call in calls:
            if call.status == "running":
                call.interrupt("found running after the process stopped", now)
        try:
            await self.tools.run_step(session, turn, calls)
        except GuardStop as guard:
            now = self.clock.now()
            skipped = [c for c in calls if c.status in ("pending", "awaiting_approval", "approved")]
            for call in skipped:
                call.skip(f"not run: {guard.stop.reason}", now)
            turn.close_step(calls, now)
            self.save(*calls, turn)
            await tools_ended(self.io, skipped)
            return await stop_turn(self.io, session, turn, guard.stop)
        except ApprovalWait as wait:
            turn.keep_results(calls, self.clock.now())  # what ran before the wait is saved now, its output with it
            turn.await_approval([c.id for c in wait.calls], self.clock.now())
            self.save(*calls, turn)
            for call in wait.calls:
                await self.emit(
                    ApprovalNeeded(session_id=str(session.id), turn_id=str(turn.id), tool_call_id=str(call.id), name=call.name, input=call.input)
                )
            names = ", ".join(sorted({c.name for c in wait.calls}))
            return TurnOutcome(session.id, turn.id, "awaiting_approval", reason=f"awaiting approval: {names}", input_id=turn.input_id)
        except asyncio.CancelledError:
            cancelled = cancel_calls(self.io, calls, self._cancel_reason(), left_running=self.tools.left_running)
            turn.close_step(calls, self.clock.now())
            self.save(*calls, turn)
            self.tools.record_late_ends(cancelled)  # stored: a function the cancel could not stop records its end after it
            await tools_ended(self.io, cancelled)
            raise
        # The safe point after the batch: steering goes into the same user message as the results.
        steering = self.controls.pending_steering(session.id, turn.id)
        now = self.clock.now()
        extra = [*result_images(calls), *(steering.blocks() if steering else ())]  # images a tool returned, for the model
        turn.close_step(calls, now, extra=extra)
        self._settled = {call.id: call.status for call in calls}
        if steering is None:
            # Re-runnable: the calls ended here may run again; the others' ends and results were
            # committed, flushed, when they ended (ToolResultsKept), and this only refers to them.
            self.save(*calls, turn, rerunnable=True)
        else:
            ids, number = steering.steer_ids, step["step"]
            self.store.update_session(session.id, lambda s: s.deliver_steering(ids, turn.id, number, now), *calls, turn,
                                      attempts=TURN_ATTEMPTS)
        return None

    def _prior_context(self, session: Session, turn: Turn) -> list[Message]:
        return prior_messages(self.store, session, turn)

    async def _compacted_for_retry(self, session: Session, turn: Turn, response: Any, attempts: int) -> bool:
        """The seam for "prompt too long": compact older turns (or, when none is left, the turn's own
        older steps), then retry the call once."""
        error = response.error
        if response.stop_reason != "error" or error is None or error.kind != "prompt_too_long" or self.compactor is None:
            return False
        if any(r["reason"].startswith("prompt_too_long") for r in turn.retries if r["step"] == turn.model_calls):
            return False
        turn.record_retry(attempt=attempts, reason="prompt_too_long: compacting older turns and retrying once", delay_s=0.0, now=self.clock.now())
        self.save(turn)
        # The request did not fit: summarise every earlier turn, else the running turn's older steps.
        return bool(await self.compactor.for_retry(self.io, session.id, turn))
