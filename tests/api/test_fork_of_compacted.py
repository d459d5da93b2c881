"""A fork of a compacted conversation reads, and shows, what its parent read at the same point.

Two ways it did not: `history(fork, at=<the turn it was cut at>)` read the fork's first event, from before the
compaction its start recorded, so it showed every compacted turn; and a fork from the end of the branch (`fork`
without `at`, chat's /fork) was cut at the end of the last turn, before a `compact` made since, so the fork's model
was handed the turns its parent had stopped reading (the reason to compact: a context grown too long)."""

from __future__ import annotations

import json

from chronicle import Agent, Chronicle
from tests.helpers import response, text


def _agent(tmp_path) -> Agent:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("noted"))]}}), encoding="utf-8")
    return Agent(tools=[], provider=f"scripted:{script}")


def _shows_old(history) -> bool:
    return "OLD-DETAIL" in json.dumps(history)


def _two_turns_the_first_compacted(app: Chronicle, agent: Agent, workspace) -> str:
    sid = app.run_sync(agent, "OLD-DETAIL", workspace=workspace).session_id
    app.run_sync(agent, "second", session=sid, workspace=workspace)
    assert app.compact(sid, "truncate", keep=1)["turns_compacted"] == 1
    return sid


def test_every_inherited_turn_of_a_fork_reads_as_its_parent_did_at_that_turn(db_url, workspace, tmp_path):
    agent = _agent(tmp_path)
    with Chronicle(db_url) as app:
        sid = _two_turns_the_first_compacted(app, agent, workspace)
        app.run_sync(agent, "third", session=sid, workspace=workspace)
        app.run_sync(agent, "fourth", session=sid, workspace=workspace)
        child = app.fork(sid, at=3)
        grandchild = app.fork(child, at=3, actor="erin@review")
        origins = {row["session_id"]: row["forked_from"] for row in app.sessions()}
        assert origins[grandchild] == {"session_id": child, "turn": 3, "actor": "erin@review"}  # who forked, as given
        assert origins[child]["actor"] not in (None, "erin@review")  # else this process's user@host
        for number in (1, 2, 3):
            parent = app.history(sid, at=number)
            assert app.history(child, at=number) == parent, number
            assert app.history(grandchild, at=number) == parent, number
        # Before the compaction the parent read the first turn whole; after it, not.
        assert _shows_old(app.history(sid, at=2)) and not _shows_old(app.history(sid, at=3))
        assert app.history(child, at=3) == app.history(child)


def test_a_fork_from_the_end_of_a_branch_compacted_since_its_last_turn_continues_compacted(db_url, workspace, tmp_path):
    agent = _agent(tmp_path)
    with Chronicle(db_url) as app:
        sid = _two_turns_the_first_compacted(app, agent, workspace)
        assert not _shows_old(app.history(sid))
        child = app.fork(sid)
        assert app.history(child) == app.history(sid)
        assert app.history(child, at=2) == app.history(child)
        app.run_sync(agent, "on the fork", session=child, workspace=workspace)
        assert not _shows_old(app.history(child))
        # An explicit turn is that turn's end, as `history --at` shows it: before the compaction.
        assert _shows_old(app.history(app.fork(sid, at=2)))
