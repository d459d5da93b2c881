"""Write tests/fixtures/v2_store.db: a store recorded by schema v2, before the typed, minimal v3 events.

Run it from a checkout of the last commit with schema v2 (the one that introduced this script):

    git worktree add /tmp/chronicle-v2 <commit> && cd /tmp/chronicle-v2 && make .venv/.installed
    .venv/bin/python ops/make_fixture_v2.py /path/to/tests/fixtures/v2_store.db

Running it against newer code would record v3 events and defeat its purpose. Ids and times are
fixed (except the fork's, which the fork use case stamps itself), so the events are the same on
every run.

What it holds (tests/integration/test_old_store_v2.py relies on this list):
- S1 `main`: 3 turns — a read_file call; a write_file call (durable: effects with before/after)
  and an approval-gated call approved with an actor; a third turn then undone by an actor; a title.
- S2 `helper`: a sub-agent session of S1.
- S3: a turn that fails after retryable provider errors (ModelCallRetried v2, structured errors).
- S4: one long turn (1 retry, then 55 tool steps): its Turn has a v3 snapshot.
- S5: 34 short turns, the first 30 compacted: its Session has a v3 snapshot.
- S6: a fork of S1 at turn 1 (forked_from {"session_id", "turn"}).
- S7: a turn steered and cancelled by an actor; the steering is requeued as the next input.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, ProviderError
from chronicle.domain.ids import tool_call_id, turn_id
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn
from chronicle.runtime.app.timetravel import fork
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from chronicle.runtime.tools.base import Toolbox
from chronicle.runtime.tools.functions import tool as function_tool
from chronicle.runtime.toolsets import resolve_tools

NS = uuid5(NAMESPACE_URL, "https://chronicle.invalid/fixtures/v2")
S1, S2, S3, S4, S5, S7 = (uuid5(NS, f"s{i}") for i in (1, 2, 3, 4, 5, 7))
ACTOR = "fixture@host"


@function_tool(requires_approval=True)
def stamp(label: str) -> str:
    """Stamp a label (asks for approval first)."""
    return f"stamped {label}"


class FixedClock:
    def __init__(self) -> None:
        self.t = datetime(2026, 6, 1, 9, 0, 0, tzinfo=timezone.utc)

    def now(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


class FlakyOnce:
    """Fails the first call with a retryable error, then answers from the script."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner, self.name, self.failed = inner, inner.name, False

    async def stream(self, request, on_delta):  # type: ignore[no-untyped-def]
        if not self.failed:
            self.failed = True
            return ModelResponse(stop_reason="error", model=request.model,
                                 error=ProviderError(kind="overloaded_error", message="Overloaded", status=529, retryable=True))
        return await self.inner.stream(request, on_delta)


def tool(id_: str, name: str, **args: object) -> dict:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def resp(*blocks: dict, usage: dict, stop: str | None = None) -> dict:
    has_tools = any(b["type"] == "tool_use" for b in blocks)
    return {"content": list(blocks), "stop_reason": stop or ("tool_use" if has_tools else "end_turn"), "usage": usage}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def u(i: int, o: int, cw: int = 0, cr: int = 0) -> dict:
    return {"input_tokens": i, "output_tokens": o, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr}


SCRIPTS = {
    "s1": {"agents": {"main": [
        [resp(text("Reading."), tool("tu_1", "read_file", path="hello.txt"), usage=u(100, 20, cw=50)),
         resp(text("It says hello world."), usage=u(150, 10, cr=50))],
        [resp(tool("tu_2", "write_file", path="hello.txt", content="hello v2\n"), tool("tu_3", "stamp", label="v2"),
              usage=u(200, 15, cr=50)),
         resp(text("Written and stamped."), usage=u(260, 12, cr=50))],
        [resp(text("Third answer, soon undone."), usage=u(300, 8))],
    ]}},
    "s2": {"agents": {"helper": [resp(text("Sub-agent done."), usage=u(40, 9))]}},
    "s3": {"agents": {"main": [{"content": [], "stop_reason": "end_turn", "usage": u(0, 0),
                               "error": {"kind": "overloaded_error", "message": "Overloaded", "status": 529, "retryable": True}}]}},
    "s4": {"agents": {"main": [resp(tool(f"tu_{i}", "list_dir", path="."), usage=u(10 + i, 3)) for i in range(55)]
                      + [resp(text("Listed many times."), usage=u(80, 4))]}},
    "s5": {"agents": {"main": [resp(text("ok"), usage=u(5, 1))]}},
}


def spec(name: str, model: str, workspace: Path, provider: str) -> AgentSpec:
    return AgentSpec(name=name, provider=provider, model=model, tools=DEFAULT_TOOLS, workspace=str(workspace), max_iterations=60)


async def build(db: Path, scratch: Path) -> None:
    store = ChronicleStore(f"sqlite:///{db}")
    clock = FixedClock()
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello world\n", encoding="utf-8")
    options = LoopOptions(max_iterations=60, auto_approve=True, retry=RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0, jitter=0.0))

    def provider(key: str) -> ScriptedProvider:
        path = scratch / f"{key}.json"
        path.write_text(json.dumps(SCRIPTS[key]), encoding="utf-8")
        return ScriptedProvider(path)

    def loop(key: str, prov=None) -> AgentLoop:  # type: ignore[no-untyped-def]
        toolbox = Toolbox([*resolve_tools(DEFAULT_TOOLS), stamp])
        return AgentLoop(store, prov or provider(key), toolbox, workspace, options=options, clock=clock)

    def new_session(sid, spec_, inputs, **links) -> None:  # type: ignore[no-untyped-def]
        now = clock.now()
        session = Session.start(sid, spec_, now, **links)
        for i, prompt in enumerate(inputs):
            session.queue_input(f"{sid.hex[:8]}-in{i}", prompt, now)
        store.create_session(session)

    async def drain(lp: AgentLoop, sid) -> None:  # type: ignore[no-untyped-def]
        while await lp.run_next(sid) is not None:
            pass

    # S1: three turns (a durable write and an approved call in the second), a title, undo of the third.
    new_session(S1, spec("main", "claude-sonnet-4-5", workspace, "scripted:s1.json"),
                ["what is in hello.txt?", "write it and stamp it", "and once more"])
    await drain(loop("s1"), S1)
    session = store.session(S1)
    session.set_title("Writing hello.txt", clock.now(), usage=u(30, 6), model="claude-haiku-4-5")
    session.undo(1, clock.now(), actor=ACTOR)
    store.save(session)

    # S2: a sub-agent of S1, linked to S1's first tool call.
    first_turn = turn_id(S1, f"{S1.hex[:8]}-in0")
    new_session(S2, spec("helper", "claude-haiku-4-5", workspace, "scripted:s2.json"), ["help the parent"],
                parent_session_id=S1, parent_tool_call_id=tool_call_id(first_turn, 0, "tu_1"))
    await drain(loop("s2"), S2)

    # S3: retryable errors until the retry policy gives up.
    new_session(S3, spec("main", "claude-sonnet-4-5", workspace, "scripted:s3.json"), ["this will fail"])
    await drain(loop("s3"), S3)

    # S4: one long turn with one retry first.
    new_session(S4, spec("main", "claude-sonnet-4-5", workspace, "scripted:s4.json"), ["list the directory many times"])
    await drain(loop("s4", FlakyOnce(provider("s4"))), S4)

    # S5: many short turns, the oldest 30 compacted into a summary.
    new_session(S5, spec("main", "claude-sonnet-4-5", workspace, "scripted:s5.json"), [f"ping {i}" for i in range(34)])
    await drain(loop("s5"), S5)
    session = store.session(S5)
    session.compact(session.head[:30], "Thirty pings, each answered ok.", "summary", clock.now(), usage=u(400, 20), model="claude-haiku-4-5")
    store.save(session)

    # S6: a fork of S1 at its first turn.
    fork(store, S1, at=1)

    # S7: a running turn steered, then cancelled; the undelivered steering is requeued.
    new_session(S7, spec("main", "claude-sonnet-4-5", workspace, "scripted:s5.json"), ["start something long"])
    session = store.session(S7)
    now = clock.now()
    item = session.next_input
    tid = turn_id(S7, item["input_id"])
    session.start_turn(tid, now)
    turn = Turn(id=tid, session_id=S7, input_id=item["input_id"], number=1, input_text=item["text"], agent="main", timestamp=now)
    turn.start(now)
    session.steer("s7-steer", "focus on the tests", clock.now(), actor=ACTOR)
    session.request_cancel("cancelled by the user", clock.now(), actor=ACTOR)
    turn.cancel("cancelled by the user", clock.now(), actor=ACTOR)
    session.end_turn(tid, "cancelled", clock.now())
    store.save(session, turn)
    store.close()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/v2_store.db").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "v2.db"
        asyncio.run(build(db, Path(tmp)))
        import sqlite3

        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
        conn.close()
        out.write_bytes(db.read_bytes())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
