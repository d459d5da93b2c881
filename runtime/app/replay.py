"""Replay: run the loop again against the recorded model responses and compare.

The replay runs in a throwaway store, never in the real one. A replay provider answers the
k-th model call of the n-th turn with what was recorded, after checking that the request the
loop built has the recorded fingerprint. Read-only tools run again (they cannot change
anything) and their results are compared in the form the run recorded them (through the session's
tool_result guardrails, secrets cut, an error's paths relative); every other tool answers with its
recorded result, as does a read-only tool that reads the store (`reads_store`: list_tasks reads the
task board, which other sessions and commands change and the throwaway store does not hold).
A tool's spawn_batch subtasks are compared with their own records (replay_batch.py).
The tools work in a scratch copy of the workspace rolled back to how it was when each turn ran
(replay_workspace.py), so a file the session read and later edited reads as it was then.
Each turn asks the model its own first call recorded asking (a session whose model was changed
between turns replays with each turn's own). The first difference is reported: that is how a code or schema change is shown to leave
behaviour intact.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from chronicle.domain.content import ModelResponse
from chronicle.domain.ids import tool_call_id
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from ..agents.tree import lineage
from ..clock import SYSTEM_CLOCK, Clock
from ..guardrails import GuardrailHook, guardrails_along
from ..hooks import Hooks
from ..loop import LoopOptions
from ..model_call import fingerprint
from ..providers.base import DeltaSink, ModelRequest
from ..retry import RetryPolicy
from ..secret_scan import scanner_for
from ..store import ChronicleStore
from ..subtasks import EFFECTS_KEY
from ..tools.base import Tool, Toolbox, ToolContext, ToolError, ToolOutput, safe_error, safe_output
from ..toolsets import resolve_tools
from .loops import assemble
from .replay_batch import difference, ran_a_writer, subtask_marks
from .replay_compaction import RecordedCompactions
from .replay_earlier import earlier_schemas, explain
from .replay_workspace import ScratchWorkspace


@dataclass
class Divergence:
    turn: int
    step: int | None
    kind: str  # "request fingerprint" | "tool result" | "model calls" | "outcome" | "compaction" | "earlier release" (replay_earlier.py)
    detail: str
    #: At a request: which of model, system, tools, messages differ, as far as the recording tells (replay_earlier.py).
    parts: dict[str, str] | None = None

    def describe(self) -> str:
        where = f"turn {self.turn}" + (f", step {self.step}" if self.step is not None else "")
        return f"diverged at {where}: {self.kind}: {self.detail}"


@dataclass
class ReplayReport:
    turns: int = 0
    model_calls: int = 0
    rechecked: int = 0
    reused: int = 0
    divergence: Divergence | None = None
    #: (turn number, status) of a turn still in flight at the end of the branch: not replayed.
    in_flight: tuple[int, str] | None = None
    #: The built-in tools' schemas of a release before editions the session was found asked with (their
    #: `EarlierSchemas.name`, runtime/tools/editions.py); None: those of its recorded edition.
    earlier_schemas: str | None = None

    @property
    def identical(self) -> bool:
        return self.divergence is None

    @property
    def exit_code(self) -> int:
        """`chronicle replay`'s: 0 identical, 1 diverged (an `earlier release` divergence too: its kind says so)."""
        return 0 if self.divergence is None else 1

    def verdict(self) -> str:
        if self.divergence is not None:
            return self.divergence.describe()
        tail = ""
        if self.in_flight is not None:
            number, status = self.in_flight
            tail = f"; turn {number} is still {status} and was not replayed (finish it with `chronicle resume`)"
        if self.earlier_schemas is not None:
            tail += (f"; asked with Chronicle's tool schemas {self.earlier_schemas}, as the release that recorded it "
                     "(before tool editions) offered them")
        return (
            f"identical: {self.turns} turn(s), {self.model_calls} model call(s) with matching request fingerprints, "
            f"{self.rechecked} read-only tool result(s) re-run and equal, {self.reused} recorded result(s) reused{tail}"
        )


class InputAndAnswerChecks(GuardrailHook):
    """The session's guardrails at the input and the final answer. A tool result is not checked here: a
    recorded one already passed the checks, and a re-run one is checked by `Replayer.run_tool` before it
    is compared. Checked twice, a check that changes every text it sees would make the replay diverge."""

    async def tool_output(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        return output


class Unwaited(RetryPolicy):
    """A replay's retries: as many attempts as the process allows, none waited for. Each is answered from the
    recording, so the backoff and a server's retry-after (seconds to minutes for a turn that failed after its
    retries) would be waited out for nothing."""

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        return 0.0


class StopReplay(Exception):
    """Raised inside the replayed loop at the first divergence or at the end of the recording."""


def _short(text: str, limit: int = 60) -> str:
    text = text.replace("\n", "⏎")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


class Replayer:
    def __init__(self, store: ChronicleStore, session_id: UUID, workspace: Path | None = None) -> None:
        self.store = store
        self.session = store.session(session_id)
        self.turns: list[Turn] = store.head_turns(self.session)
        spec = self.session.spec
        self.workspace = (workspace or Path(spec.workspace or ".")).expanduser().resolve()
        self.report = ReplayReport()
        self.name = "replay"
        self.scratch: ScratchWorkspace | None = None
        #: The session's tool_result checks, which a re-run read-only result passes before it is compared.
        self.checks = GuardrailHook([])
        #: What each replayed subtask returned, by (calling tool call id, place): shown if its batch diverges.
        self.subtask_outputs: dict[tuple[str, int], str] = {}
        #: The toolbox the replayed loop asks with, and whether a recorded fingerprint was compared yet: a
        #: session recorded before tool editions is matched to its release's built-in schemas at the first.
        self.box: Toolbox | None = None
        self.compared = False
        #: The request found asked with an earlier release's schemas, and its fingerprint with them: a retry
        #: of that call sends the same request again, built before the toolbox was given them.
        self.matched: tuple[ModelRequest, str] | None = None

    def shown(self, position: int) -> int:
        """The recorded number of the branch's `position`-th turn (1-based), as `history --at` counts."""
        return self.turns[position - 1].number

    def diverge(self, turn: int, step: int | None, kind: str, detail: str, parts: dict[str, str] | None = None) -> None:
        if self.report.divergence is None:
            self.report.divergence = Divergence(self.shown(turn), step, kind, detail, parts)
        raise StopReplay(self.report.divergence.describe())

    def unplaced(self, turn: int, step: int | None, detail: str) -> None:
        """A recorded compaction the replay cannot make again (replay_compaction.py): the requests after it could not
        be what was recorded, so that is the divergence, not the first request that differs for it. Recorded, not
        raised: it may be told before a turn begins, outside the loop's handling; the next model call stops there."""
        if self.report.divergence is None:
            self.report.divergence = Divergence(self.shown(turn), step, "compaction", detail)

    def as_recorded(self, request: ModelRequest, recorded: str, now: str) -> str:
        """`now`, or the recorded fingerprint when the session, recorded before tool editions, was asked
        with the built-in schemas of an earlier release (replay_earlier.py): those are asked with from here on.
        Decided at the first recorded fingerprint only, so one session is never asked with two sets."""
        if self.matched is not None and request is self.matched[0]:
            return self.matched[1]
        first, self.compared = not self.compared, True
        if now == recorded or not first or self.session.spec.tool_edition != 1 or self.box is None:
            return now
        found = earlier_schemas(self.box, request, recorded)
        if found is None:
            return now
        earlier, now = found
        self.box.offer(self.box.schemas_as(earlier))
        self.report.earlier_schemas = earlier.name
        self.matched = (request, now)
        return now

    # -- the provider side ---------------------------------------------------------------------

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        number, step = request.turn_number, request.call_index
        if self.report.divergence is not None:
            raise StopReplay(self.report.divergence.describe())
        original = self.turns[number - 1]
        if step >= len(original.steps):
            if original.status == "completed":
                self.diverge(number, step, "model calls", f"the loop asks for model call {step + 1}; the recording has {len(original.steps)}")
            raise StopReplay("end of the recording")
        recorded = original.steps[step]
        if recorded.get("fingerprint"):
            now = self.as_recorded(request, recorded["fingerprint"], fingerprint(request))
            if now != recorded["fingerprint"]:
                assert self.box is not None
                why = explain(self.store, original, step, request, recorded, now, self.box, self.turns, self.session.spec.tool_edition)
                self.diverge(number, step, why.kind, why.detail, why.parts)
        self.report.model_calls += 1
        return ModelResponse.model_validate(recorded["response"])

    # -- the tool side -------------------------------------------------------------------------

    def toolbox(self) -> Toolbox:
        replayer = self

        def wrap(cls: type[Tool], reuse: bool = False) -> Tool:
            async def run(self: Tool, args: Any, ctx: ToolContext) -> ToolOutput:
                return await replayer.run_tool(type(self) if reuse else cls, self, args, ctx)

            extra: dict[str, Any] = {"read_only": False} if reuse else {}
            return type(f"Replay{cls.__name__}", (cls,), {"run": run, **extra})()

        from ..tools.mcp_tools import tool_class

        # MCP tools answer from the recording too: a replay must not depend on a server being up or unchanged.
        mcp = [wrap(tool_class(entry), reuse=True) for entry in self.session.spec.mcp_tools]
        # delegate & co. answer from the recording like any writer; the user's tools load by import path, one deleted
        # or renamed since left out as a list's lost tool is (the requests then differ, and the replay says so)
        root = self.scratch.root if self.scratch is not None else self.workspace
        tools = [wrap(type(t)) for t in resolve_tools(self.session.spec.tools, root, [])] + mcp
        return Toolbox(tools, edition=self.session.spec.tool_edition)  # asked with the schemas it was recorded with

    async def run_tool(self, cls: type[Tool], tool: Tool, args: Any, ctx: ToolContext) -> ToolOutput:
        if ctx.subtask is not None:
            return await self.run_subtask(cls, tool, args, ctx)
        replay_store: ChronicleStore = ctx.io.store
        call = replay_store.tool_call(UUID(ctx.tool_call_id))
        number = replay_store.turn(call.turn_id).number
        original_turn = self.turns[number - 1]
        original = self.store.find_tool_call(tool_call_id(original_turn.id, call.step, call.tool_use_id))
        if original is None or not original.resolved:
            self.diverge(number, call.step, "tool result", f"{call.name} ({call.tool_use_id}) has no recorded result")
        assert original is not None
        recorded = original_turn.result_of(original)
        # A tool reading the store (list_tasks: the board) would read the throwaway store's, which has none of it.
        rerun = cls.read_only and not cls.reads_store and original.status in ("completed", "failed")
        if not rerun or ran_a_writer(original.effects, ctx.io.toolbox):
            self.report.reused += 1
            if self.scratch is not None and original.status == "completed":
                self.scratch.apply_effects(original.effects)  # what the writer did, so later reads see it
            return ToolOutput(recorded.content if isinstance(recorded.content, str) else str(recorded.content),
                              is_error=recorded.is_error, effects=list(original.effects))
        try:
            output = await super(type(tool), tool).run(args, ctx)  # type: ignore[misc]  # the recorded tool's own run, past replay's wrapper
            output = await self.checks.tool_output(call, output)  # what was recorded had passed them (or was their rejection)
            got, got_error = safe_output(output.content, scanner_for(ctx.workspace)), output.is_error  # recorded with secrets cut
        except ToolError as exc:
            output, got, got_error = None, safe_error(ctx, str(exc)), True  # as a failure is recorded: paths relative, secrets cut
        self.check_batch(number, call.step, f"{call.name} ({call.tool_use_id})", original.effects, ctx)
        if (got, got_error) != (recorded.content, recorded.is_error):
            self.diverge(number, call.step, "tool result",
                         f"{call.name} ({call.tool_use_id}) returned {_short(got)}, recorded {_short(str(recorded.content))}")
        self.report.rechecked += 1
        if output is None:
            raise ToolError(got)
        return output

    async def run_subtask(self, cls: type[Tool], tool: Tool, args: Any, ctx: ToolContext) -> ToolOutput:
        """A subtask of a re-run tool runs again; `check_batch` compares it with its record when its caller ends."""
        if not cls.read_only:  # the recording ran none (its caller would be answered from it): the batch asks something new
            raise ToolError(f"{cls.name} is not read-only: replay does not run it")
        key = (ctx.tool_call_id, ctx.subtask or 0)
        try:
            output = await super(type(tool), tool).run(args, ctx)  # type: ignore[misc]  # past replay's wrapper
        except ToolError as exc:
            self.subtask_outputs[key] = _short(safe_output(str(exc)))
            raise
        self.subtask_outputs[key] = _short(safe_output(output.content))
        return output

    def check_batch(self, number: int, step: int, caller: str, effects: list[dict[str, Any]], ctx: ToolContext) -> None:
        replayed = list(ctx.extras.get(EFFECTS_KEY, ()))
        shown = {place: self.subtask_outputs.pop((ctx.tool_call_id, place)) for place in range(len(replayed))
                 if (ctx.tool_call_id, place) in self.subtask_outputs}
        found = difference(caller, subtask_marks(effects), replayed, shown)
        if found is not None:
            self.diverge(number, step, "tool result", found)
        self.report.rechecked += len(replayed)

    # -- driving -------------------------------------------------------------------------------

    async def run(self, clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
        # A turn's end waits for its cancel check (runtime/controls.py, CancelWatcher.stop), but only
        # so long: a check a stalled disk still holds may touch the scratch store's files after they
        # are closed, and removing them must not turn a finished replay into an error.
        with tempfile.TemporaryDirectory(prefix="chronicle-replay-", ignore_cleanup_errors=True) as tmp:
            scratch = ChronicleStore(f"sqlite:///{Path(tmp) / 'replay.db'}")
            self.scratch = ScratchWorkspace.prepare(self.store, self.session, self.workspace, Path(tmp) / "workspace")
            spec = self.session.spec
            copy = Session.start(self.session.id, spec, clock.now())
            scratch.create_session(copy)
            # No guards, no title call, no compaction but the recorded ones, where they were made
            # (replay_compaction.py): the replay re-asks exactly what was recorded. The
            # session's and the workspace's guardrails do apply: they shaped the inputs, tool results and
            # answers that were recorded.
            # A sub-agent's session replays under its parents' checks too, as it ran.
            guardrails = guardrails_along([s.spec.guardrails for s in lineage(self.store, self.session)], self.workspace)
            self.checks = GuardrailHook(guardrails)
            self.box = self.toolbox()
            loop = assemble(scratch, self, self.box, self.scratch.root,
                            LoopOptions(auto_approve=True, max_iterations=spec.max_iterations,
                                        retry=Unwaited(max_attempts=RetryPolicy.from_env().max_attempts)), clock=clock,
                            hooks=Hooks([InputAndAnswerChecks(guardrails)] if guardrails else []),
                            compactor=RecordedCompactions(self.store, self.session, self.turns, self.unplaced))
            for number, original in enumerate(self.turns, 1):
                if not original.finished:
                    # Only what was decided can be compared: a turn in flight has no outcome yet.
                    self.report.in_flight = (original.number, original.status)
                    break
                self.scratch.enter_turn(original.id)
                session = scratch.session(copy.id)
                asked = asked_model(self.store, original)
                if asked is not None:  # the model this turn asked (Session.ModelChanged, or an older process's --model)
                    session.change_model(asked[0], clock.now(), thinking_tokens=asked[1], actor="replay")
                session.queue_input(original.input_id, original.input_text, clock.now(), attachments=list(original.attachments) or None)
                scratch.save(session)
                outcome = await loop.run_next(copy.id)
                if self.report.divergence is not None:
                    break
                self.report.turns += 1
                replayed = scratch.turn(outcome.turn_id) if outcome and outcome.turn_id else None
                if original.status == "completed":
                    if replayed is None or replayed.status != "completed":
                        status = replayed.status if replayed else "not run"
                        reason = f" ({outcome.reason})" if outcome and outcome.reason else ""
                        self.report.divergence = Divergence(self.shown(number), None, "outcome", f"recorded completed, replay {status}{reason}")
                        break
                    if replayed.model_calls != original.model_calls:
                        self.report.divergence = Divergence(
                            self.shown(number), replayed.model_calls, "model calls",
                            f"replay ended after {replayed.model_calls} model call(s); the recording has {original.model_calls}",
                        )
                        break
            scratch.close()
        return self.report


def asked_model(store: ChronicleStore, turn: Turn) -> tuple[str, int | None] | None:
    """(model, thinking budget) the turn's first model call recorded asking (its request_delta); None if it made none."""
    for _, event in store.events_with_positions([turn.id], topic_suffix=".ModelResponded", limit=1):
        delta = event.request_delta or {}
        if delta.get("model"):
            return str(delta["model"]), delta.get("thinking_tokens")
    return None


async def replay(store: ChronicleStore, session_id: UUID, workspace: Path | None = None) -> ReplayReport:
    return await Replayer(store, session_id, workspace).run()
