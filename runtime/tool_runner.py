"""Runs the tool calls of one step: approvals, at-most-once execution, exactly one result each.

A non-idempotent tool has its `running` state committed before it runs; that commit is what
makes at-most-once possible after a crash. Its outcome (output, file effects) is committed as
soon as it finishes, too: a crash before the step's results are stored must not turn a tool
that did run into an "interrupted" one whose effects `undo --files` cannot put back. Unbounded
tools (delegate) get both commits as well, so the log shows the call started before its
children's events. Read-only and idempotent tools skip them: running them again is harmless,
and commits saved per step are the main lever on speed. They record no Started either: their
run is committed whole, with the step's results, by one Completed or Failed that counts the
attempt (it started at its timestamp less its duration).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from contextvars import ContextVar
from time import monotonic
from typing import Any, Awaitable, Callable, Literal

from chronicle.domain.approval_policy import ApprovalPolicy
from chronicle.domain.tool_call import ToolCall

from .actor import process_actor
from .attachments import store_result_images
from .controls import STEERING_SKIP_REASON
from .hooks import NeedApproval, Skip, Stop
from .live import ApprovalNeeded, ToolEnd, ToolStart
from .loop_io import LoopIO
from .secret_scan import scanner_for
from .tools.base import ToolContext, ToolError, ToolOutput, safe_error, scan_blocks, scan_output, truncate
from .tools.threads import LateEnd, ThreadRun, abandoned, left_running_note, owe_late_end, raised_text, settled, start_recording

Decision = Literal["approve", "deny", "always"]
Approver = Callable[[ToolCall], Awaitable[Decision | None]]

CUT_AT_MAX_TOKENS = "the response was cut at max_tokens; this tool call's arguments may be truncated, so it was not run"
#: How much of a late end's output (a function left running, ToolCall.FinishedAfterAbandon) is recorded.
LATE_OUTPUT_CHARS = 2_000

log = logging.getLogger(__name__)


class ApprovalWait(Exception):
    """The step cannot go on until a person answers; carries the calls that wait."""

    def __init__(self, calls: list[ToolCall]) -> None:
        self.calls = calls
        super().__init__(f"{len(calls)} tool call(s) await approval")


class GuardStop(Exception):
    """A before_tool_call hook stopped the turn."""

    def __init__(self, stop: Stop) -> None:
        self.stop = stop
        super().__init__(stop.reason)


#: The cancels a tool's KeyboardInterrupt made, heard by whoever set a list here (the library's run and resume, which
#: raise KeyboardInterrupt once the cancel is recorded, as Ctrl-C during them does).
TOOL_INTERRUPTS: ContextVar[list[str] | None] = ContextVar("chronicle_tool_interrupts", default=None)


class ToolInterrupted(Exception):
    """A tool raised KeyboardInterrupt: carried as an ordinary exception, since asyncio lets a task's
    KeyboardInterrupt (or SystemExit) out of the event loop, ending the program with nothing recorded."""


async def contained(running: Awaitable[ToolOutput], name: str) -> ToolOutput:
    """A tool's run, its sys.exit (argparse's, a script's) an error result like any exception, its KeyboardInterrupt
    a ToolInterrupted: inside the task that runs it, which is its own under `wait_for` (Python 3.11)."""
    try:
        return await running
    except SystemExit as exc:
        raise ToolError(raised_text(name, exc)) from None
    except KeyboardInterrupt:
        raise ToolInterrupted(name) from None


class ToolRunner:
    def __init__(self, io: LoopIO) -> None:
        self.loop = io
        #: "Always" answers given while this loop runs, per session: the loop's Session object is
        #: not reloaded between steps, so an answer recorded through update_session must be
        #: remembered here to cover the same tool later in the same turn.
        self._answered_always: dict[Any, set[str]] = {}
        #: Calls whose sync function a cancel left running (runtime/tools/threads.py), until their
        #: cancel is stored: `cancel_calls` words their result, `record_late_ends` then watches them.
        self.left_running: dict[Any, ThreadRun] = {}
        #: Why the turn in hand is being cancelled when a tool raised KeyboardInterrupt (the turn's cancel reason).
        self.interrupted: str | None = None
        self.policy = ApprovalPolicy()
        #: The calls of the turn in hand whose tool_end this runner emitted: a call denied earlier
        #: in the turn is not shown ending twice when its step goes on after an approval wait.
        self._ended_in: Any = None
        self._ended_ids: set[Any] = set()

    def needs_approval(self, call: ToolCall, always_allowed: Any) -> bool:
        """The tool's flag or the session's recorded policy (`require`) asks for it; a standing "always" does not."""
        tool = self.loop.toolbox.get(call.name)
        return bool(tool and self.policy.requires(call.name, tool.requires_approval) and call.name not in always_allowed)

    async def run_step(self, session: Any, turn: Any, calls: list[ToolCall]) -> None:
        """Resolve every call of the step, in order; raise ApprovalWait to pause, GuardStop to stop."""
        loop = self.loop
        self.session, self.turn = session, turn
        self.always = self._answered_always.setdefault(session.id, set())
        self.always.update(session.always_allowed)
        #: The approval policy recorded on the session's spec (None recorded: the tools' flags, a person asked).
        self.policy = session.spec.approval_policy
        #: Calls a hook asked a person about (doom loop): never approved by --yes or "always".
        self.flagged: dict[Any, str] = {}
        self.steered = False
        self.left_running.clear()
        if self._ended_in != turn.id:
            self._ended_in, self._ended_ids = turn.id, set()
        batch: list[ToolCall] = []
        for index, call in enumerate(calls):
            if call.status == "denied" and call.id not in self._ended_ids:
                # Denied while the turn waited (`chronicle deny`, the HTTP API, the library): no stream
                # has shown its end yet, and the stream resuming the turn is the one that can.
                await self._ended(call)
                continue
            if call.resolved and call.status != "interrupted":
                continue
            if call.status == "interrupted":
                if not (call.idempotent and loop.toolbox.get(call.name)):
                    continue
            if call.status in ("pending", "awaiting_approval", "approved") and self._steering_arrived():
                await self._skip_unstarted([*batch, call])
                batch.clear()
                continue
            if call.status == "pending":
                verdict = await loop.hooks.before_tool_call(session, turn, call)
                if isinstance(verdict, Stop):
                    await self._flush_batch(batch)
                    raise GuardStop(verdict)
                if isinstance(verdict, Skip):  # a user's hook: this call is not run, the turn goes on
                    call.skip(verdict.reason, loop.clock.now())
                    await self._ended(call)
                    continue
                if self._invalid(call):  # no one is asked to approve a call that could never run
                    await self._ended(call)
                    continue
                if isinstance(verdict, NeedApproval):
                    self.flagged[call.id] = verdict.reason
                if isinstance(verdict, NeedApproval) or self.needs_approval(call, self.always):
                    call.request_approval(loop.clock.now(), reason=verdict.reason if isinstance(verdict, NeedApproval) else None)
            if call.status == "awaiting_approval":
                await self._flush_batch(batch)
                decided = await self._decide(session, call)
                if not decided:
                    waiting = [call] + self._queue_approvals(session, calls[index + 1:])
                    raise ApprovalWait(waiting)
            if call.status == "denied":
                continue
            tool = loop.toolbox.get(call.name)
            if tool is not None and tool.parallel_safe and call.status == "pending":
                batch.append(call)
                continue
            await self._flush_batch(batch)
            await self.execute(call)
        await self._flush_batch(batch)

    def _invalid(self, call: ToolCall) -> bool:
        """Whether the call's arguments fail its tool's schema: then failed at once with what is wrong, the error
        result the model reads, before any approval is asked (a person approving `amount="lots"` approved nothing
        that could run). An MCP tool's arguments are the server's to check (McpTool.parse takes them as they are)."""
        problem = self._arguments_problem(call)
        if problem is not None:
            call.fail(problem, self.loop.clock.now())
        return problem is not None

    def _arguments_problem(self, call: ToolCall) -> str | None:
        tool = self.loop.toolbox.get(call.name)
        try:
            if tool is not None:
                tool.parse(call.input)
        except ToolError as exc:
            return str(exc)
        return None

    def _queue_approvals(self, session: Any, rest: list[ToolCall]) -> list[ToolCall]:
        waiting = []
        for call in rest:
            if call.status == "pending" and self.needs_approval(call, self.always) and self._arguments_problem(call) is None:
                call.request_approval(self.loop.clock.now())  # one with bad arguments fails when the step goes on
            if call.status == "awaiting_approval":
                waiting.append(call)
        return waiting

    async def _decide(self, session: Any, call: ToolCall) -> bool:
        loop = self.loop
        now = loop.clock.now()
        flagged = self.flagged.get(call.id) or call.asked_by_hook  # recorded: a resumed turn's question stays a person's
        if loop.options.auto_approve and not flagged:
            call.approve(now, by="--yes", actor=process_actor())
            return True
        if call.name in self.always and not flagged:
            call.approve(now, by="always", actor=process_actor())
            return True
        decided = None if flagged else self.policy.decide(call.name)  # a guard's question is for a person
        if decided is not None:
            verdict, cause = decided
            if verdict == "approve":
                call.approve(now, by="policy", actor=process_actor(), reason=cause)
            else:  # shown as it ends, as a skip is: no person saw it asked
                call.deny(now, reason=cause, by="policy", actor=process_actor())
                await self._ended(call)
            return True
        if loop.approver is None:
            return False
        await loop.emit(
            ApprovalNeeded(
                session_id=str(session.id), turn_id=str(call.turn_id), tool_call_id=str(call.id), name=call.name,
                input=call.input, reason=flagged or "requires approval",
            )
        )
        decision = await loop.approver(call)
        now = loop.clock.now()
        if decision is None:
            return False
        if decision == "deny":  # ended here, as a policy's denial or a skip is: its tool_end follows
            call.deny(now, actor=process_actor())
            await self._ended(call)
        else:
            call.approve(now, by="user", always=decision == "always", actor=process_actor())
            if decision == "always" and call.name not in self.always:
                self.always.add(call.name)
                loop.store.update_session(session.id, lambda s: s.allow_always(call.name, now))
        return True

    def _steering_arrived(self) -> bool:
        """A safe point: has the user steered this turn (and not asked to wait for the batch)?"""
        if not self.steered:
            steering = self.loop.controls.pending_steering(self.session.id, self.turn.id)
            self.steered = bool(steering and steering.skip_unstarted)
        return self.steered

    async def _skip_unstarted(self, calls: list[ToolCall]) -> None:
        now = self.loop.clock.now()
        for call in calls:
            call.skip(STEERING_SKIP_REASON, now)
            await self._ended(call)

    async def _flush_batch(self, batch: list[ToolCall]) -> None:
        if not batch:
            return
        calls = list(batch)
        batch.clear()
        if self._steering_arrived():
            await self._skip_unstarted(calls)
            return
        if len(calls) == 1:
            await self.execute(calls[0])
            return
        await asyncio.gather(*(self.execute(c) for c in calls))

    async def execute(self, call: ToolCall) -> None:
        loop = self.loop
        sid = str(call.session_id)
        tool = loop.toolbox.get(call.name)
        if tool is None:
            call.fail(f"unknown tool: {call.name}", loop.clock.now())
            await self._ended(call)
            return
        try:
            args = tool.parse(call.input)
        except ToolError as exc:
            call.fail(str(exc), loop.clock.now())
            await self._ended(call)
            return
        # A call that must not run twice is committed as running before it runs (at-most-once); one
        # that may run again records its whole run in one event when it ends, and no Started.
        durable = not call.idempotent or tool.unbounded
        if durable:
            call.start(loop.clock.now())
            loop.save(call)
        await loop.emit(ToolStart(session_id=sid, tool_call_id=str(call.id), tool_use_id=call.tool_use_id, name=call.name, input=call.input))
        ctx = ToolContext(
            workspace=loop.workspace, timeout_s=loop.options.tool_timeout_s, session_id=sid, tool_call_id=str(call.id), io=loop,
            store_url=getattr(loop.store, "url", None), event_loop=asyncio.get_running_loop(),
        )
        started = monotonic()
        limit = tool.timeout_s or loop.options.tool_timeout_s
        left: ThreadRun | None = None  # a sync function the timeout could not stop
        ran: ToolOutput | None = None  # what the tool returned, before the guardrails saw it
        try:
            output = ran = await asyncio.wait_for(contained(tool.run(args, ctx), call.name), timeout=None if tool.unbounded else limit)
            output = await loop.hooks.tool_output(call, output)  # guardrails may replace it, or reject it (ToolError)
        except ToolError as exc:
            call.record_effects(ctx.extras.get("subtasks", []), loop.clock.now())  # a failed call keeps its subtasks too
            call.fail(safe_error(ctx, str(exc)), loop.clock.now(), duration_ms=_ms(started), ran=True)
        except asyncio.TimeoutError:
            left = abandoned(ctx)
            call.record_effects(ctx.extras.get("subtasks", []), loop.clock.now())
            timed_out = f"{call.name} timed out after {limit:g} s" + (f"; {left_running_note(call.name)}" if left else "")
            call.fail(timed_out, loop.clock.now(), duration_ms=_ms(started), ran=True)
        except asyncio.CancelledError:
            running = abandoned(ctx)
            if running is not None:
                self.left_running[call.id] = running
            if ran is not None:  # the tool had ended (a cancel reached its guardrails): what it changed stays on record
                call.record_effects([*ran.effects, *ctx.extras.get("subtasks", ())], loop.clock.now())
            raise
        except ToolInterrupted:
            # As Ctrl-C: the turn is cancelled and that is recorded (its reason names the tool); a program using the
            # library then hears KeyboardInterrupt (TOOL_INTERRUPTS), a worker goes on with its other sessions.
            self.interrupted = f"{call.name} raised KeyboardInterrupt"
            heard = TOOL_INTERRUPTS.get()
            if heard is not None:
                heard.append(self.interrupted)
            raise asyncio.CancelledError(self.interrupted) from None
        except Exception as exc:  # noqa: BLE001 - a tool's bug becomes an error result the model reads
            call.record_effects(ctx.extras.get("subtasks", []), loop.clock.now())
            call.fail(safe_error(ctx, raised_text(call.name, exc)), loop.clock.now(), duration_ms=_ms(started), ran=True)
        else:  # a command's own output is kept as printed, secrets aside (runtime/secret_scan.py)
            scanner = scanner_for(loop.workspace)
            content = scan_output(output.content, scanner)
            scanned, in_blocks = scan_blocks(output.blocks, scanner)
            blocks = store_result_images(loop.store, scanned, loop.clock)  # images: stored once, by content
            now = loop.clock.now()
            call.note_redactions("output", dict(Counter(content.counts) + Counter(in_blocks)), now)
            call.complete(
                content.value, now, is_error=output.is_error, duration_ms=_ms(started),
                effects=[*output.effects, *ctx.extras.get("subtasks", ())],  # spawn_batch's subtasks (runtime/subtasks.py)
                ends_turn=output.ends_turn and tool.may_end_turn, blocks=blocks,
            )
        # Its end is committed now, its output with it: kept by the turn, where it is stored. So is the
        # end of a call whose function ran on, which must be stored before that function's late end.
        if durable or left is not None:
            self.turn.keep_results([call], loop.clock.now())
            loop.save(call, self.turn)
        if left is not None:
            self._record_late_end(call, left, ctx)
        await self._ended(call)

    def record_late_ends(self, calls: list[ToolCall]) -> None:
        """Once the cancels of `calls` are stored: each sync function a cancel left running records
        its end on its call when it comes (ToolCall.FinishedAfterAbandon)."""
        for call in calls:
            left = self.left_running.pop(call.id, None)
            if left is not None and call.status == "cancelled":
                self._record_late_end(call, left, None)

    def _record_late_end(self, call: ToolCall, left: ThreadRun, ctx: ToolContext | None) -> None:
        """When the function ends (in its thread, or now if it has): its end on a fresh copy of the call,
        secrets cut out and trimmed. The turn has moved on, so nothing else is written. It is owed to the
        store, whose closer waits for it (a bounded wait, then a line saying it gave up); a store that fails
        otherwise is logged, never raised into a thread nobody waits for."""
        store, clock, workspace, call_id, name = self.loop.store, self.loop.clock, self.loop.workspace, call.id, call.name
        owed = owe_late_end(store, name, call_id)  # closing the store waits for it (runtime/tools/threads.py)

        def record(end: LateEnd) -> None:
            if not start_recording(owed):
                return  # the store was closed without it, and its closer said so
            try:
                scanned = scan_output(end.output, scanner_for(workspace))
                output = scanned.value
                if end.raised:  # worded as the runner words an error result: paths relative to the workspace
                    output = safe_error(ctx or ToolContext(workspace=workspace), output)
                fresh = store.tool_call(call_id)
                now = clock.now()
                fresh.note_redactions("late output", dict(scanned.counts), now)
                fresh.record_late_end(end.raised, truncate(output, LATE_OUTPUT_CHARS), end.duration_ms, now)
                store.save(fresh)
            except Exception:  # noqa: BLE001 - the function's thread has nobody to raise to
                log.warning("could not record the late end of tool call %s (%s)", call_id, name, exc_info=True)
            finally:
                settled(owed)

        left.when_ended(record)

    async def _ended(self, call: ToolCall) -> None:
        """Every way a call ends (run, failed, skipped, denied by a person, a policy or elsewhere) ends
        here: the hooks' after_tool_call, then its tool_end."""
        self._ended_ids.add(call.id)
        await self.loop.hooks.after_tool_call(self.session, self.turn, call)
        block = call.result_block()
        await self.loop.emit(
            ToolEnd(
                session_id=str(call.session_id), tool_call_id=str(call.id), tool_use_id=call.tool_use_id, name=call.name,
                status=call.status, output=block.content, is_error=block.is_error, duration_ms=call.duration_ms,
            )
        )


def _ms(started: float) -> float:
    return round((monotonic() - started) * 1000, 3)
