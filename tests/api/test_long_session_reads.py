"""A turn of a long session reads the earlier turns' events at most once per process, not once per turn.

Each turn read every earlier turn three times (the check before it starts, the compaction estimate, the
context), so a 1,000-turn session took 0.25-0.8 s a turn, growing with every turn. Ended turns never change:
their messages are kept for the process (runtime/turn_messages.py) and every one of those reads shares them.
"""

from __future__ import annotations

import json
from uuid import UUID

from chronicle import Agent, Chronicle
from tests.helpers import response, text


def agent(tmp_path) -> Agent:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agents": {"main": [response(text("Ok."))]}, "title": ["Hi"]}), encoding="utf-8")
    return Agent(name="main", instructions="x", tools=[], provider=f"scripted:{path}")


def decoded_turn_events(app: Chronicle, turn_ids: set[UUID]) -> list[int]:
    """Counts, as the store decodes them, the events of the given turns (one list cell per event)."""
    seen: list[int] = []
    mapper = app.store.mapper
    decode = mapper.to_domain_event

    def counting(stored):
        if stored.originator_id in turn_ids:
            seen.append(1)
        return decode(stored)

    mapper.to_domain_event = counting
    return seen


def test_a_turn_of_a_long_session_decodes_no_earlier_turn_again(sqlite_url, tmp_path):
    main = agent(tmp_path)
    with Chronicle(sqlite_url) as app:
        sid = app.run_sync(main, "q 0", workspace=str(tmp_path)).session_id
        for i in range(1, 12):
            app.run_sync(main, f"q {i}", session=sid, workspace=str(tmp_path))
        head = list(app.store.session(UUID(sid)).head)
        newest = len(list(app.store.events.get(head[-1])))
        seen = decoded_turn_events(app, set(head))
        app.run_sync(main, "one more", session=sid, workspace=str(tmp_path))
        assert 0 < len(seen) <= newest  # the turn that ended last, read once; none of the eleven before it
    # A process that opens the store reads each earlier turn's events once, not once per reader.
    with Chronicle(sqlite_url) as app:
        head = list(app.store.session(UUID(sid)).head)
        newest = len(list(app.store.events.get(head[-1])))
        events = sum(len(list(app.store.events.get(t))) for t in head)
        seen = decoded_turn_events(app, set(head))
        app.run_sync(main, "and again", session=sid, workspace=str(tmp_path))
        assert events <= len(seen) <= events + newest  # each turn once (the newest perhaps twice: its usage is read too)
        seen.clear()
        app.run_sync(main, "last", session=sid, workspace=str(tmp_path))
        assert seen == []  # none of the turns this process has read
    with Chronicle(sqlite_url) as app:  # what the model was sent for the last turn: every turn before it, in order
        sent = app.history(sid, at=15, step=0)
    asked = [m["content"][0]["text"] if isinstance(m["content"], list) else m["content"] for m in sent if m["role"] == "user"]
    assert asked == [*(f"q {i}" for i in range(12)), "one more", "and again", "last"]
    assert len(sent) == 29
