"""The web viewer's pages, fetched as a browser would: escaped, time-travelling, paginated."""

from __future__ import annotations

import httpx

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.server.serving import serving


def test_the_session_page_shows_the_conversation_as_of_any_turn_and_escapes_what_the_model_wrote(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        [response(text("<script>alert('x')</script> first answer"), tool_use("tu_w", "write_file", path="notes.txt", content="new\n")),
         response(text("wrote it"))],
        [response(text("second answer"))],
    ])
    first = cli("run", "one", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    assert cli("run", "two", "--session", sid, "--json", db=db_url).returncode == 0
    with serving(db_url, workspace) as base:
        listing = httpx.get(f"{base}/ui/sessions")
        assert listing.status_code == 200 and sid[:8] in listing.text
        assert sid[:8] not in httpx.get(f"{base}/ui/sessions", params={"q": "no-such-thing"}).text
        assert ">?</span></td>" in listing.text, "a scripted model has no price: '?' as the CLI shows it, not a blank"

        now = httpx.get(f"{base}/ui/sessions/{sid}")
        assert now.status_code == 200
        assert "<script>alert" not in now.text and "&lt;script&gt;alert" in now.text
        assert "second answer" in now.text and 'id="turn-slider"' in now.text
        assert "+new" in now.text, "a write_file call shows its diff"

        then = httpx.get(f"{base}/ui/sessions/{sid}", params={"turn": 1})
        assert "second answer" not in then.text and "wrote it" in then.text
        assert then.text.count('class="bubble') < now.text.count('class="bubble')
        assert httpx.get(f"{base}/ui/sessions/nonexistent").status_code == 404


def test_the_session_page_of_a_delegating_session_shows_its_sub_agent_tree_and_a_fork_its_inherited_turns(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[agents.researcher]\ndescription = "Reads files"\n', encoding="utf-8")
    task = {"agent": "researcher", "task": "what does hello.txt say?", "context": ""}
    script = write_script(tmp_path / "s.json",
                          [[response(tool_use("tu_d", "delegate", tasks=[task])), response(text("It says hello."))],
                           [response(text("second"))]],
                          researcher=[response(tool_use("r1", "task_complete", status="completed", summary="hello world"))])
    run = cli("run", "investigate", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    sid = json_lines(run.stdout)[0]["session_id"]
    assert cli("run", "more", "--session", sid, db=db_url).returncode == 0
    fork = cli("fork", sid, "--at", "1", "--json", db=db_url)
    fork_id = json_lines(fork.stdout)[0]["session_id"]
    with serving(db_url, workspace) as base:
        page = httpx.get(f"{base}/ui/sessions/{sid}")
        assert page.status_code == 200
        assert "Sub-agents" in page.text and "researcher" in page.text
        assert "task.Opened" in page.text and "task.Completed" in page.text, "the timeline has the board's task events"
        child = next(r for r in httpx.get(f"{base}/sessions").json() if r["agent"] == "researcher")
        assert f'/ui/sessions/{child["session_id"]}' in page.text
        assert child["instance"] == "researcher-hello-txt-1" and ">researcher-hello-txt-1</a>" in page.text  # its instance name
        listing = httpx.get(f"{base}/ui/sessions", params={"q": "hello-txt"})
        assert "↳ researcher-hello-txt-1" in listing.text and sid not in listing.text, "the list finds a child by its instance"
        own = httpx.get(f"{base}/ui/sessions/{child['session_id']}")
        assert "task.Opened" in own.text and "task.Completed" in own.text, "a sub-agent's timeline has its own task, on its parent's board"
        forked = httpx.get(f"{base}/ui/sessions/{fork_id}")
        assert forked.status_code == 200 and "It says hello." in forked.text and "inherited from the parent session" in forked.text
        assert "second" not in forked.text


def test_each_tool_call_links_to_why_it_was_made_and_that_page_escapes_what_was_recorded(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(text("<b>first</b> I look"), tool_use("tu_a", "read_file", path="missing.txt")),
        response(text("that failed, so"), tool_use("tu_b", "read_file", path="hello.txt")),
        response(text("hello world it says")),
    ])
    first = cli("run", "read <i>it</i>", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    with serving(db_url, workspace) as base:
        page = httpx.get(f"{base}/ui/sessions/{sid}").text
        assert f'href="/ui/sessions/{sid}/why?call=tu_b&amp;turn=1"' in page
        why = httpx.get(f"{base}/ui/sessions/{sid}/why", params={"call": "tu_b", "turn": 1})
        assert why.status_code == 200
        assert "Why read_file (tu_b)" in why.text
        assert "read &lt;i&gt;it&lt;/i&gt;" in why.text and "<i>it</i>" not in why.text  # escaped, as every page
        assert "result of <code>tu_a</code> (error)" in why.text  # what it saw just before: the failed read
        assert "that failed, so" in why.text and "hello world" in why.text and "hello world it says" in why.text
        chain = httpx.get(f"{base}/sessions/{sid}/why", params={"call": "tu_b"}).json()
        for position in chain["evidence"]:
            assert f"#{position}" in why.text
        assert httpx.get(f"{base}/ui/sessions/{sid}/why", params={"call": "tu_z"}).status_code == 404


def test_after_an_undo_the_why_links_name_each_call_by_the_turn_history_and_audit_give_it(db_url, workspace, tmp_path):
    """The page numbers turns as `why` and `history --at` do (3 after an undo and a new turn, not its place on the
    branch, 2); its links pass that number both ways, and the why page of a call undone since says so."""
    turns = [[response(tool_use(f"tu_{k}", "read_file", path="hello.txt")), response(text(f"answer {k}"))] for k in "abc"]
    script = write_script(tmp_path / "s.json", turns)
    run = ("--provider", f"scripted:{script}", "--workspace", str(workspace), "--json")
    sid = json_lines(cli("run", "one", *run, db=db_url).stdout)[0]["session_id"]
    assert cli("run", "two", "--session", sid, *run, db=db_url).returncode == 0
    assert cli("undo", sid, db=db_url).returncode == 0
    assert cli("run", "three", "--session", sid, *run, db=db_url).returncode == 0
    with serving(db_url, workspace) as base:
        page = httpx.get(f"{base}/ui/sessions/{sid}").text
        assert f'href="/ui/sessions/{sid}/why?call=tu_c&amp;turn=3"' in page
        # Each turn is headed by the number the CLI gives it (history --at, audit, why)
        assert 'id="turn-3" data-turn="3"' in page and "turn 3 · " in page and "turn 1 · " in page
        # Its Fork button forks at that turn as `fork --at` counts it (it sent the branch place, 2: the undone turn)
        assert """data-body='{"at": 3}'""" in page and "Fork at turn 3" in page
        latest = httpx.get(f"{base}/ui/sessions/{sid}/why", params={"call": "tu_c", "turn": 3})
        assert latest.status_code == 200 and "three" in latest.text and "undone since" not in latest.text
        assert f"/ui/sessions/{sid}?turn=3#turn-3" in latest.text  # the session page's ?turn= is the same count
        undone = httpx.get(f"{base}/ui/sessions/{sid}/why", params={"call": "tu_b"})
        assert undone.status_code == 200 and "undone since" in undone.text and "two" in undone.text
        assert f"/ui/sessions/{sid}?turn=2#turn-2" in undone.text  # shown there too, marked undone


def test_a_call_waiting_for_approval_links_to_why_before_anyone_answers(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("I will clean up."), tool_use("tu_rm", "bash", command="rm -rf build")),
                                                response(text("cleaned"))])
    paused = cli("run", "clean the build", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    assert f"See why with `chronicle why {sid}`" in paused.stderr  # the pause says where to look, as the page does
    with serving(db_url, workspace) as base:
        page = httpx.get(f"{base}/ui/sessions/{sid}").text
        [link] = [part.split('"')[0] for part in page.split('id="approvals"')[1].split('href="')[1:2]]
        why = httpx.get(f"{base}{link.replace('&amp;', '&')}")
        assert why.status_code == 200, why.text
        assert "Why bash (tu_rm)" in why.text and "I will clean up." in why.text and "clean the build" in why.text
        assert "approval requested" in why.text and 'class="status awaiting_approval"' in why.text


def test_the_session_list_pages_through_every_session_by_its_own_links(sqlite_url, workspace, tmp_path):
    """`next page →` asked for `?page=N` while the page read `page_no`: it showed the first hundred again, so the
    sessions after them could be reached only by searching."""
    import re

    from chronicle import Agent, Chronicle

    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    with Chronicle(sqlite_url) as app:
        made = {app.submit(Agent(provider=f"scripted:{script}"), f"task {n}", workspace=str(workspace))["session_id"]
                for n in range(205)}
    with serving(sqlite_url, workspace) as base:
        seen: list[str] = []
        url, pages = f"{base}/ui/sessions", []
        while url:
            html = httpx.get(url).text
            pages.append(html)
            seen += re.findall(r'<tr data-session="([^"]+)"', html)
            after = re.search(r'<a rel="next" href="([^"]+)"', html)
            url = f"{base}/ui/sessions{after.group(1).replace('&amp;', '&')}" if after else ""
        assert len(pages) == 3 and len(seen) == len(set(seen)) == 205 and set(seen) == made
        assert "101–200 of 205" in pages[1] and 'rel="prev" href="?page=0' in pages[1]
        assert "201–205 of 205" in pages[2] and 'rel="next"' not in pages[2]
        assert httpx.get(f"{base}/ui/sessions", params={"page": -1}).status_code == 422
        # Past the end, the page said "no sessions yet: start one with …" of a store with 205.
        past = httpx.get(f"{base}/", params={"page": 7}).text
        assert "no sessions" not in past and "page 7 is past the end of the list: 205 session(s), on pages 0 to 2" in past
        assert 'href="?page=2&q=&status="' in past and 'rel="prev" href="?page=2&' in past, "links to the last page"
        filtered = httpx.get(f"{base}/", params={"page": 1, "q": "nothing has this"}).text
        assert "no sessions match" in filtered, "a search that matches nothing says so, on any page"
