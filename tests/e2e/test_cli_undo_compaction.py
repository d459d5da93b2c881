"""An undo ends only the compactions that cover a turn it takes back. A session keeps every compaction it made; the one
the model reads through is the newest whose turns are all still the branch's first. Undoing the last turn used to bring
back every turn of the branch whole, although the compactions made before the newest covered none of the undone turns;
`history` and the model's next request (built from events, as `history --at TURN --step N` shows it) agree."""

from __future__ import annotations

import json

from tests.helpers import cli, json_lines, response, text


def _five_turns(db_url, workspace, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "five.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text(f"answer {i}"))] for i in range(1, 7)]},
                                "summary": [response(text("not asked")), response(text("SUMMARY of turns one to four"))]}),
                    encoding="utf-8")
    first = cli("run", "turn 1", "--provider", f"scripted:{path}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    for i in range(2, 6):
        assert cli("run", f"turn {i}", "--session", sid, "--json", db=db_url).returncode == 0
    return sid


def _compact(sid, db_url, strategy, keep):  # type: ignore[no-untyped-def]
    done = cli("compact", sid, "--strategy", strategy, "--keep", str(keep), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[0]


def _texts(messages) -> list[str]:  # type: ignore[no-untyped-def]
    return [b["text"] for m in messages for b in m["content"] if b.get("type") == "text"]


def _history(sid, db_url, *args):  # type: ignore[no-untyped-def]
    shown = cli("history", sid, *args, "--json", db=db_url)
    assert shown.returncode == 0, shown.stderr
    return json_lines(shown.stdout)


def test_undoing_the_last_turn_keeps_the_compactions_that_do_not_cover_it(db_url, workspace, tmp_path):
    sid = _five_turns(db_url, workspace, tmp_path)
    moved = _compact(sid, db_url, "workspace", 2)["summary"]  # turns 1–3 to memory/DATE.md
    summary = _compact(sid, db_url, "summary", 1)["summary"]  # turns 1–4: the summary, keeping the pointer
    assert summary.startswith("SUMMARY of turns one to four") and moved in summary
    assert _compact(sid, db_url, "truncate", 0)["summary"] == summary  # turn 5 left out too
    assert _texts(_history(sid, db_url)) == [f"Summary of the conversation so far:\n{summary}"]

    assert cli("undo", sid, db=db_url).returncode == 0  # turn 5: only the truncation covered it
    after = _texts(_history(sid, db_url))
    assert after == [f"Summary of the conversation so far:\n{summary}"], after  # was turns 1–4 whole again
    assert not any(t.startswith("turn ") for t in after)

    assert cli("undo", sid, db=db_url).returncode == 0  # turn 4: the summary covered it; the move did not
    assert _texts(_history(sid, db_url)) == [f"Summary of the conversation so far:\n{moved}"]
    assert cli("redo", sid, db=db_url).returncode == 0  # turn 4 back: the summary holds again
    assert _texts(_history(sid, db_url)) == [f"Summary of the conversation so far:\n{summary}"]

    # What the model is sent for the next turn (6: turn 5 keeps its number) is built from the same events: the
    # summary, then the turn's input.
    assert cli("run", "turn 6", "--session", sid, "--json", db=db_url).returncode == 0
    sent = _texts(_history(sid, db_url, "--at", "6", "--step", "0"))
    assert sent == [f"Summary of the conversation so far:\n{summary}", "turn 6"], sent
    assert _texts(_history(sid, db_url)) == [f"Summary of the conversation so far:\n{summary}", "turn 6", "answer 6"]
