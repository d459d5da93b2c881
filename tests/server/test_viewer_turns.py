"""The session page is addressed by turn as the CLI counts turns: `?turn=N` is what `history --at N` shows, the old
`?at=PLACE` (a place on the active branch) redirects there, and the turns an undo took back are shown, marked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import cli, json_lines, response, text, write_script
from tests.server.serving import serving

#: Turns start at these markers in the page; a turn's own rows (its head, its end) are `turn-…` classes.
TURN_START = re.compile(r'<div class="turn(?: undone)?" id="turn-(\d+)"')


def _undone_then_new_turn(db_url: str, workspace: Path, tmp_path: Path, undoer: str = "ci@host") -> str:
    """Turns one, two; `undo` (by `undoer`); three. `history --at 3` is then one, three; the log still has two."""
    script = write_script(tmp_path / "s.json", [[response(text(f"answer {k}"))] for k in "abc"])
    run = ("--provider", f"scripted:{script}", "--workspace", str(workspace), "--json")
    sid = str(json_lines(cli("run", "one", *run, db=db_url).stdout)[0]["session_id"])
    assert cli("run", "two <img src=x onerror=alert(1)>", "--session", sid, *run, db=db_url).returncode == 0
    undo = cli("undo", sid, db=db_url, env={"CHRONICLE_ACTOR": undoer})
    assert undo.returncode == 0, undo.stderr
    assert cli("run", "three", "--session", sid, *run, db=db_url).returncode == 0
    return sid


def _turns(page: str) -> dict[int, str]:
    """Each turn shown, by the number its block carries, with its block's HTML, in page order."""
    parts = TURN_START.split(page)
    return {int(parts[i]): parts[i + 1].split('<div id="live">')[0] for i in range(1, len(parts), 2)}


def _last_text(messages: list[dict[str, Any]]) -> str:
    content = messages[-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_turn_n_is_the_turn_history_at_n_ends_with_and_the_page_shows_every_turn_up_to_it(db_url, workspace, tmp_path):
    sid = _undone_then_new_turn(db_url, workspace, tmp_path)
    with serving(db_url, workspace) as base:
        for number, shown in ((1, [1]), (2, [1, 2]), (3, [1, 2, 3])):
            page = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": number})
            assert page.status_code == 200, page.text
            turns = _turns(page.text)
            assert list(turns) == shown, f"?turn={number} shows turns {list(turns)}"
            # The page's last turn is the one `history --at N` ends with (the JSON API's `at` is that count, unchanged).
            said = httpx.get(f"{base}/sessions/{sid}/history", params={"at": number}).json()
            assert _last_text(said) in turns[number], (number, _last_text(said))
            assert f'<output id="turn-shown">{number}</output> of 3' in page.text
        now = httpx.get(f"{base}/ui/sessions/{sid}").text
        assert list(_turns(now)) == [1, 2, 3] and 'value="3"' in now
        # The page's own links name turns the same way (the turn list, the slider): no `?at=` left.
        assert "?at=" not in now and '"?turn=" + slider.value' in now
        one = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": 1}).text
        assert '<a href="?turn=3">3</a>' in one and '<a href="?turn=2">2</a>' in one


def test_the_old_at_place_redirects_307_to_the_turn_at_that_place_keeping_the_other_parameters(db_url, workspace, tmp_path):
    sid = _undone_then_new_turn(db_url, workspace, tmp_path)
    with serving(db_url, workspace) as base:
        page = f"{base}/ui/sessions/{sid[:8]}"
        for place, turn in ((1, 1), (2, 3), (99, 3)):  # place 2 on the branch is turn 3; past the end, the last (as ?at= was)
            moved = httpx.get(page, params={"at": place, "all": "1", "q": "a b&c"}, follow_redirects=False)
            assert moved.status_code == 307, moved.text
            assert moved.headers["location"] == f"/ui/sessions/{sid[:8]}?turn={turn}&all=1&q=a+b%26c"
        landed = httpx.get(page, params={"at": 2}, follow_redirects=True)
        assert landed.status_code == 200 and str(landed.url).endswith("?turn=3") and list(_turns(landed.text)) == [1, 2, 3]
        # `turn` beside `at` wins: `at` is dropped
        both = httpx.get(page, params={"turn": 1, "at": 2}, follow_redirects=False)
        assert both.status_code == 307 and both.headers["location"] == f"/ui/sessions/{sid[:8]}?turn=1"


def test_a_turn_the_session_does_not_have_is_a_404_saying_which_turns_it_has(db_url, workspace, tmp_path):
    sid = _undone_then_new_turn(db_url, workspace, tmp_path)
    line = f"session {sid} has no turn {{}}: its turns are 1 to 3, numbered as `chronicle history --at N` counts them"
    with serving(db_url, workspace) as base:
        for wrong in (4, 0, -1):
            page = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": wrong}, headers={"Accept": "text/html"})
            assert page.status_code == 404 and page.headers["content-type"].startswith("text/html"), page.text
            assert f"<p>{line.format(wrong)}</p>" in page.text
        program = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": 4})
        assert program.status_code == 404 and program.json() == {"error": line.format(4), "code": 2}


def test_undone_turns_are_shown_where_the_log_has_them_marked_with_the_undo_and_offer_no_fork(db_url, workspace, tmp_path):
    undoer = "<b>alice</b>"  # who undid is recorded as given: escaped like everything else recorded
    sid = _undone_then_new_turn(db_url, workspace, tmp_path, undoer=undoer)
    with serving(db_url, workspace) as base:
        page = httpx.get(f"{base}/ui/sessions/{sid}").text
        turns = _turns(page)
        undo = next((p, e) for p, e in ((e["position"], e) for e in httpx.get(f"{base}/sessions/{sid}/log").json())
                    if e["event"] == "TurnsUndone")
        position, event = undo
        assert 'data-undone="true"' in page.split('id="turn-2"')[1].split(">")[0]
        assert "<strong>undone</strong> by &lt;b&gt;alice&lt;/b&gt;" in turns[2] and "<b>alice</b>" not in page
        assert f"at {event['timestamp'][:19]}" in turns[2] and f"(TurnsUndone #{position})" in turns[2]
        assert "two &lt;img src=x onerror=alert(1)&gt;" in turns[2] and "<img src=x" not in page
        assert "answer b" in turns[2] and "undone" not in turns[1] + turns[3]
        # Fork is offered on the branch's turns, as `fork --at` numbers them, never on the undone one.
        assert 'data-action="fork"' not in turns[2]
        assert """data-body='{"at": 1}'>Fork at turn 1""" in turns[1] and """data-body='{"at": 3}'>Fork at turn 3""" in turns[3]
        assert "2 turn(s) on its branch, 1 undone" in page
        # On a page that ends at the undone turn the actions card forks at the last turn shown on the branch.
        actions = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": 2}).text.split('id="actions"')[1]
        assert """data-body='{"at": 1}'>Fork at turn 1""" in actions

        # Undone again, then redone: marked by the undo that took it back last, then not marked at all.
        assert cli("undo", sid, db=db_url).returncode == 0
        again = _turns(httpx.get(f"{base}/ui/sessions/{sid}").text)
        second = [e["position"] for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "TurnsUndone"][-1]
        assert f"(TurnsUndone #{second})" in again[3] and 'data-action="fork"' not in again[3]
        assert cli("redo", sid, db=db_url).returncode == 0
        redone = _turns(httpx.get(f"{base}/ui/sessions/{sid}").text)
        assert "undone" not in redone[3] and """data-body='{"at": 3}'""" in redone[3] and "undone" in redone[2]
