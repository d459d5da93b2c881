"""A long session built fast: its turns recorded through the domain commands the loop uses, a few
hundred per transaction, then one more turn run by the real loop (so the loop accepts what was built).

Running 1,000 turns through the loop would take minutes on the shared machine; what the viewer
reads (turns, responses, retries, the log) is the same either way."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from chronicle.domain.content import ModelResponse
from chronicle.domain.ids import turn_id
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn
from chronicle.runtime.app.loops import build_loop
from chronicle.runtime.app.specs import new_spec
from chronicle.runtime.sessions import submit_input
from chronicle.runtime.store import ChronicleStore
from tests.helpers import response, text, write_script

BATCH = 250


def build(db: str, workspace: Path, script_dir: Path, turns: int, retry_at: tuple[int, ...] = ()) -> UUID:
    """A session of `turns` turns: turn N asks "question N" and is answered "answer N"; the turns in
    `retry_at` had one retried model call first (an overloaded API). The last turn is run by the loop."""
    script = write_script(script_dir / "long.json", [[response(text(f"answer {n}"))] for n in range(1, turns + 1)])
    store = ChronicleStore(db)
    try:
        spec = new_spec(workspace, f"scripted:{script}")
        now = datetime.now(timezone.utc)
        session = Session.start(uuid4(), spec, now)
        store.create_session(session)
        pending: list[Any] = []
        for n in range(1, turns):
            input_id = uuid4().hex
            session.queue_input(input_id, f"question {n}", now)
            tid = turn_id(session.id, input_id)
            turn = Turn(id=tid, session_id=session.id, input_id=input_id, number=n, input_text=f"question {n}",
                        agent=spec.name, timestamp=now)
            turn.start(now)
            session.start_turn(tid, now)
            if n in retry_at:
                turn.record_retry(1, "overloaded_error: Overloaded", 2.0, now,
                                  error={"kind": "overloaded", "message": "Overloaded", "status": 529, "retry_after_s": None})
            turn.record_response(ModelResponse(content=[{"type": "text", "text": f"answer {n}"}], model="scripted",
                                               usage={"input_tokens": 10 * n, "output_tokens": 5}), now)
            turn.complete(now)
            session.end_turn(tid, now)
            pending.append(turn)
            if len(pending) == BATCH:
                store.save(session, *pending)
                pending = []
        store.save(session, *pending)
        submit_input(store, session.id, f"question {turns}")
        loop = build_loop(store, store.session(session.id).spec, workspace=workspace)
        outcome = asyncio.run(loop.run_next(session.id))
        assert outcome is not None and outcome.status == "completed", outcome
        return session.id
    finally:
        store.close()
