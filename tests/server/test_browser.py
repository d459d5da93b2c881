"""The viewer in a real headless Chromium (Debian's package, driven by playwright): approve a
paused call, watch the answer arrive live, and move the time slider."""

from __future__ import annotations

import functools
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from chronicle.runtime.server import session_page
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.server import long_session
from tests.server.serving import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="!!! no chromium: `make test` installs Debian's chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the file's tests: starting playwright and the browser is a second each time. Each test's
    pages live in contexts of their own (`browser`), so no cookie or storage passes from one test to the next."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as pw:
        shared = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield shared
        shared.close()


@pytest.fixture
def browser(chromium):
    """The shared Chromium, with every context (and so every page) the test opened closed at its end."""
    yield chromium
    _close_pages(chromium)


def _close_pages(browser) -> None:  # type: ignore[no-untyped-def]
    """What closing the browser did for the test's pages: each context, with its pages, cookies and open streams."""
    for context in browser.contexts:
        context.close()


def _until(predicate, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _shot(page, tmp_path: Path, name: str, full_page: bool = True) -> None:  # type: ignore[no-untyped-def]
    page.screenshot(path=str(tmp_path / name), full_page=full_page)
    keep = os.environ.get("CHRONICLE_SCREENSHOTS_DIR")  # set to docs/img to refresh the README's pictures
    if keep:
        page.screenshot(path=str(Path(keep) / name), full_page=full_page)


def _goto(page, url):
    """Open `url`, letting a reload the page scheduled itself (on a turn's end) finish first instead of racing it."""
    for attempt in range(3):
        try:
            page.goto(url)
            return
        except Exception as error:  # playwright's Error, worded by which navigation won the race
            raced = ("interrupted by another navigation", "net::ERR_ABORTED")
            if not any(words in str(error) for words in raced) or attempt == 2:
                raise
            page.wait_for_load_state("load")


def test_approve_in_the_browser_see_the_answer_arrive_and_travel_back_in_time(db_url, workspace, tmp_path, browser):
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [
        [response(text("I will write the file."), tool_use("tu_b", "bash", command="echo approved > out.txt")),
         response(text("Wrote it; checking."), tool_use("tu_r", "read_file", path="out.txt")),
         response(text("Done: out.txt says approved."), until_file="finish")],
        [response(text("Second turn answer."))],
    ])
    with serving(db_url, workspace, env_extra={"CHRONICLE_ACTOR": "ci-reviewer"}) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "write out.txt", "provider": f"scripted:{script}"}).json()["session_id"]
        _until(lambda: any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()))

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/ui/sessions/{sid}")
        expect = playwright_api.expect
        expect(page.locator("#approvals")).to_contain_text("echo approved > out.txt")
        _shot(page, tmp_path, "viewer-approval.png")

        page.locator("#approvals button.primary[data-action=approve]").click()
        expect(page.locator("#action-result")).to_contain_text("approved")
        # The next step arrives over the event stream while the last model call is still running.
        expect(page.locator("#live")).to_contain_text("Wrote it; checking.", timeout=30_000)
        (tmp_path / "finish").write_text("", encoding="utf-8")  # the last model call answers once the live step was seen
        expect(page.locator("#conversation")).to_contain_text("Done: out.txt says approved.", timeout=60_000)
        assert (workspace / "out.txt").read_text().strip() == "approved"

        httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "and now?"})
        _until(lambda: httpx.get(f"{base}/sessions").json()[0]["turns"] == 2
               and httpx.get(f"{base}/sessions").json()[0]["status"] == "idle")
        # A new tab: the first one reloads itself at each turn's end, and its reloads for the
        # second turn raced this navigation (three times in a row once, with the worker on a thread).
        page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _goto(page, f"{base}/ui/sessions/{sid}")
        expect(page.locator("#conversation")).to_contain_text("Second turn answer.")
        expect(page.locator("#turn-1 .decision")).to_contain_text("approved by ci-reviewer (user)")
        page.locator("#turn-slider").fill("1")
        page.wait_for_url("**?turn=1")
        expect(page.locator("#conversation")).not_to_contain_text("Second turn answer.")
        expect(page.locator("#conversation")).to_contain_text("Done: out.txt says approved.")
        _shot(page, tmp_path, "viewer-time-travel.png")
        _close_pages(browser)
    assert (tmp_path / "viewer-approval.png").stat().st_size > 10_000


def test_a_thousand_turn_session_opens_and_time_travels_a_page_of_turns_at_a_time(db_url, workspace, tmp_path, browser):
    playwright_api = pytest.importorskip("playwright.sync_api")
    with ThreadPoolExecutor(1) as thread:  # its last turn runs in asyncio.run, which the shared playwright's loop forbids here
        sid = str(thread.submit(long_session.build, db_url, workspace, tmp_path, 1000, retry_at=(500,)).result())
    with serving(db_url, workspace) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        expect = playwright_api.expect
        conversation = page.locator("#conversation")

        page.goto(f"{base}/ui/sessions/{sid}")
        expect(conversation).to_contain_text("answer 1000")
        expect(page.locator("#turn-shown")).to_have_text("1000")
        assert page.locator("#conversation .turn").count() == session_page.TURNS_SHOWN
        assert "answer 980\n" not in conversation.inner_text() and "question 1\n" not in conversation.inner_text()
        assert page.locator("#turn-list a").count() < 3 * session_page.TURNS_SHOWN, "the turn list is windowed, not 1,000 links"
        assert len(page.content()) < 150_000

        page.locator("#turn-slider").fill("500")
        page.wait_for_url("**?turn=500")
        expect(page.locator("#turn-500")).to_contain_text("answer 500")
        expect(page.locator("#turn-500 .retry")).to_contain_text("overloaded")
        expect(page.locator("#turn-500 .retry")).to_contain_text("waited 2.0 s")
        assert page.locator("#turn-501").count() == 0 and page.locator("#turn-480").count() == 0
        page.locator("#turn-499").scroll_into_view_if_needed()
        _shot(page, tmp_path, "viewer-long-session.png", full_page=False)

        page.locator("#turn-list a[rel=prev]").click()
        page.wait_for_url("**?turn=480")
        expect(page.locator("#turn-480")).to_contain_text("answer 480")
        assert page.locator("#conversation .turn").count() == session_page.TURNS_SHOWN
        _close_pages(browser)
    assert not [u for u in requested if "/history" in u or u.endswith("/log")], "the page never fetches the whole history"


def test_after_an_undo_and_a_new_turn_the_page_numbers_turns_as_the_cli_marks_the_undone_one_and_forks_as_fork_at(
        db_url, workspace, tmp_path, browser):
    """Turns one, two; undo; three. The page heads them 1, 2 (undone), 3, as `history --at` counts them; the slider
    moves by that count; turn 2 offers no Fork, and turn 3's Fork forks at what `fork --at 3` forks at."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [[response(text(f"answer {k}"))] for k in "abc"])
    run = ("--provider", f"scripted:{script}", "--workspace", str(workspace), "--json")
    sid = json_lines(cli("run", "one", *run, db=db_url).stdout)[0]["session_id"]
    assert cli("run", "two", "--session", sid, *run, db=db_url).returncode == 0
    assert cli("undo", sid, db=db_url, env={"CHRONICLE_ACTOR": "undoer@ci"}).returncode == 0
    assert cli("run", "three", "--session", sid, *run, db=db_url).returncode == 0
    by_cli = json_lines(cli("fork", sid, "--at", "3", "--json", db=db_url).stdout)[0]
    with serving(db_url, workspace) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        expect = playwright_api.expect
        page.goto(f"{base}/ui/sessions/{sid}")
        turns = page.locator("#conversation .turn")
        assert [turns.nth(i).get_attribute("data-turn") for i in range(turns.count())] == ["1", "2", "3"]
        expect(page.locator("#turn-3 .turn-head")).to_contain_text("turn 3 ·")
        expect(page.locator("#turn-2 .undone-mark")).to_contain_text("undone by undoer@ci")
        expect(page.locator("#turn-2")).to_contain_text("answer b")
        assert page.locator("#turn-2").evaluate("e => getComputedStyle(e.querySelector('.bubble')).opacity") == "0.5"
        assert page.locator("#turn-1 .undone-mark, #turn-3 .undone-mark").count() == 0
        assert page.locator("#turn-2 button[data-action=fork]").count() == 0, "no Fork on the undone turn"
        _shot(page, tmp_path, "viewer-undone-turn.png")

        page.locator("#turn-3 button[data-action=fork]").click()
        expect(page.locator("#action-result")).to_contain_text("open the fork")
        forked = httpx.get(f"{base}/sessions").json()
        fork_id = next(r["session_id"] for r in forked if (r.get("forked_from") or {}).get("turn") == 3
                       and r["session_id"] != by_cli["session_id"])
        assert page.locator("#action-result").inner_text().startswith("200 ")
        # The same conversation as the CLI's fork --at 3 and history --at 3: one, three (not the undone two)
        history = [httpx.get(f"{base}/sessions/{s}/history").json() for s in (fork_id, by_cli["session_id"])]
        assert history[0] == history[1] == httpx.get(f"{base}/sessions/{sid}/history", params={"at": 3}).json()
        assert "three" in str(history[0]) and "two" not in str(history[0])

        page.goto(f"{base}/ui/sessions/{sid}")
        page.locator("#turn-slider").fill("2")
        page.wait_for_url("**?turn=2")
        assert page.locator("#conversation .turn").last.get_attribute("data-turn") == "2"
        expect(page.locator("#turn-2 .undone-mark")).to_contain_text("undone")
        expect(page.locator("#actions button[data-action=fork]")).to_have_text("Fork at turn 1")
        _close_pages(browser)


def test_a_page_opened_while_the_turn_runs_brings_up_the_approval_when_it_is_asked_for(db_url, workspace, tmp_path, browser):
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [
        response(text("Thinking it over."), tool_use("tu_b", "bash", command="echo late > late.txt"), until_file="ask"),
        response(text("Wrote late.txt.")),
    ])
    with serving(db_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "write late.txt", "provider": f"scripted:{script}"}).json()["session_id"]
        _until(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "running")
        page = browser.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/ui/sessions/{sid}")
        expect = playwright_api.expect
        assert page.locator("#approvals").count() == 0, "opened before the model asked for anything"
        (tmp_path / "ask").write_text("", encoding="utf-8")  # only now does the model ask (a fixed delay raced the browser's start)
        expect(page.locator("#approvals")).to_contain_text("echo late > late.txt", timeout=30_000)
        page.locator("#approvals button.primary[data-action=approve]").click()
        expect(page.locator("#conversation")).to_contain_text("Wrote late.txt.", timeout=60_000)
        _close_pages(browser)
    assert (workspace / "late.txt").read_text().strip() == "late"


def test_with_a_token_the_browser_logs_in_once_by_url_then_lists_approves_and_follows_live(sqlite_url, workspace, tmp_path, browser):
    """A browser cannot send `Authorization: Bearer`, nor can the page's fetch or EventSource as they
    were: `/?token=` once sets a cookie and leaves the address; the list, the Approve button and the
    live stream then work on the cookie alone. Without it, a 401 page says how to pass the token."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [
        response(text("I will write the file."), tool_use("tu_b", "bash", command="echo approved > out.txt")),
        response(text("Wrote it; checking."), tool_use("tu_r", "read_file", path="out.txt")),
        response(text("Done: out.txt says approved."), until_file="finish"),
    ])
    token = "viewer-s3cret"
    bearer = {"Authorization": f"Bearer {token}"}
    with serving(sqlite_url, workspace, token=token) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "write out.txt", "provider": f"scripted:{script}"},
                         headers=bearer).json()["session_id"]
        _until(lambda: any(e["event"] == "ApprovalRequested"
                           for e in httpx.get(f"{base}/sessions/{sid}/log", headers=bearer).json()))
        expect = playwright_api.expect

        stranger = browser.new_page()
        refused = stranger.goto(f"{base}/ui/sessions/{sid}")
        assert refused is not None and refused.status == 401
        expect(stranger.locator("main")).to_contain_text("/?token=TOKEN")
        expect(stranger.locator("main")).not_to_contain_text("write out.txt")
        stranger.close()

        context = browser.new_context()
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/?token={token}")
        assert page.url == f"{base}/", "the token leaves the address bar"
        [cookie] = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and token not in cookie["value"]
        page.locator(f"a[href='/ui/sessions/{sid}']").click()
        page.wait_for_url(f"**/ui/sessions/{sid}")
        expect(page.locator("#approvals")).to_contain_text("echo approved > out.txt")
        page.locator("#approvals button.primary[data-action=approve]").click()
        expect(page.locator("#action-result")).to_contain_text("approved")
        expect(page.locator("#live")).to_contain_text("Wrote it; checking.", timeout=30_000)
        (tmp_path / "finish").write_text("", encoding="utf-8")  # the last model call answers once the live step was seen
        expect(page.locator("#conversation")).to_contain_text("Done: out.txt says approved.", timeout=60_000)
        _close_pages(browser)
    assert (workspace / "out.txt").read_text().strip() == "approved"


def test_undo_and_redo_buttons_are_offered_only_when_they_can_act_and_put_the_files_back_and_forth(
        sqlite_url, workspace, tmp_path, browser):
    """Redo is greyed out until something was undone; Undo takes the turn back with its files, Redo puts both back
    (with files, as Undo took them), and each button is greyed out again once it cannot act."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [[response(tool_use("w", "write_file", path="made.txt", content="v1")),
                                                 response(text("wrote it"))]])
    sid = json_lines(cli("run", "make it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                         db=sqlite_url).stdout)[0]["session_id"]
    assert (workspace / "made.txt").read_text() == "v1"
    with serving(sqlite_url, workspace) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        expect = playwright_api.expect
        undo, redo = page.locator("#actions button[data-action=undo]"), page.locator("#actions button[data-action=redo]")
        page.goto(f"{base}/ui/sessions/{sid}")
        expect(undo).to_be_enabled()
        expect(redo).to_be_disabled()

        undo.click()
        expect(page.locator("#action-result")).to_contain_text("200")
        page.wait_for_load_state("load")
        _until(lambda: not (workspace / "made.txt").exists())
        expect(redo).to_be_enabled(timeout=10_000)  # after the page reloaded itself
        expect(undo).to_be_disabled()

        redo.click()
        expect(page.locator("#action-result")).to_contain_text("200")
        _until(lambda: (workspace / "made.txt").exists())
        assert (workspace / "made.txt").read_text() == "v1"
        expect(redo).to_be_disabled(timeout=10_000)
        expect(undo).to_be_enabled()
        _close_pages(browser)


def test_always_allow_in_the_browser_approves_the_call_and_the_next_one_of_that_tool_runs_unasked(
        sqlite_url, workspace, tmp_path, browser):
    """The page's third answer to an approval, as chat's `a`: this call, and the tool from now on in this session."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [[
        response(tool_use("b1", "bash", command="echo one >> out.txt")),
        response(tool_use("b2", "bash", command="echo two >> out.txt")),
        response(text("Both ran.")),
    ]])
    paused = cli("run", "write twice", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                 db=sqlite_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    with serving(sqlite_url, workspace) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/ui/sessions/{sid}")
        always = page.locator("#approvals button[data-action=approve]:not(.primary)")
        playwright_api.expect(always).to_have_text("Always allow bash")
        always.click()
        playwright_api.expect(page.locator("#action-result")).to_contain_text("200")
        _until(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "idle")
        assert (workspace / "out.txt").read_text().split() == ["one", "two"]
        kinds = [(e["kind"], e["name"]) for e in httpx.get(f"{base}/sessions/{sid}/audit").json()]
        assert ("always_allow", "bash") in kinds and kinds.count(("approval_requested", "bash")) == 1
        _close_pages(browser)


def test_another_sites_page_open_in_the_browser_cannot_approve_start_or_read_anything(sqlite_url, workspace, tmp_path, browser):
    """What a page of any site could do to a server on loopback with no token: its `fetch(…, {mode: "no-cors"})`
    needs no answer from the server to be sent, with no body, a text/plain one or a Blob (no Content-Type), and a
    form posts too. Before, the first approved the pending bash call (by a two-character prefix of the session's
    id) and the Blob started a session with the page's prompt. The page here is served from another port, so it is
    another origin of this same machine, as a local dev server or an opened HTML file would be."""
    import http.server
    import threading

    script = write_script(tmp_path / "s.json", [response(tool_use("tu_b", "bash", command="echo pwned > out.txt")),
                                                 response(text("Done."))])
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<!doctype html><title>some other site</title><p>hello</p>", encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site"))
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with serving(sqlite_url, workspace) as base:
            sid = httpx.post(f"{base}/sessions", json={"prompt": "run it", "provider": f"scripted:{script}"}).json()["session_id"]
            _until(lambda: any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()))
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{other.server_address[1]}/index.html")
            read = page.evaluate("""async ([target, sid, provider]) => {
                const sent = [
                    fetch(`${target}/sessions/${sid.slice(0, 2)}/approve`, {method: "POST", mode: "no-cors"}),
                    fetch(`${target}/sessions/${sid}/approve`, {method: "POST", mode: "no-cors", body: '{"always": true}'}),
                    fetch(`${target}/sessions`, {method: "POST", mode: "no-cors",
                                                 body: new Blob([JSON.stringify({prompt: "from the page", provider})])}),
                ];
                await Promise.allSettled(sent);
                try { return await (await fetch(`${target}/sessions`)).text(); } catch (e) { return "not read: " + e; }
            }""", [base, sid, f"scripted:{script}"])
            assert read.startswith("not read"), "the browser gives another site no answer to read"
            log = httpx.get(f"{base}/sessions/{sid}/log").json()
            assert not [e for e in log if e["event"] in ("Approved", "ToolAlwaysAllowed")], "the call still waits"
            with page.expect_navigation():
                page.evaluate("""([target, sid]) => {
                const form = document.createElement("form");
                form.method = "POST"; form.enctype = "text/plain"; form.action = `${target}/sessions/${sid}/approve`;
                const field = document.createElement("input"); field.name = '{"always": true, "x": "'; field.value = '"}';
                form.appendChild(field); document.body.appendChild(form); form.submit();
            }""", [base, sid])
            assert "is not this server's origin" in page.content(), "the form's answer is the refusal"
            log = httpx.get(f"{base}/sessions/{sid}/log").json()
            assert not [e for e in log if e["event"] in ("Approved", "ToolAlwaysAllowed")], "the call still waits"
            assert [s["session_id"] for s in httpx.get(f"{base}/sessions").json()] == [sid], "no session was started"
            assert not (workspace / "out.txt").exists()
            _close_pages(browser)
    finally:
        other.shutdown()
        other.server_close()


def test_a_page_of_an_idle_session_shows_a_turn_started_elsewhere_as_it_runs(sqlite_url, workspace, tmp_path, browser):
    """A session page opened while the session was idle followed nothing: a turn started after (by the CLI, a worker,
    a channel) never appeared until the page was reloaded by hand. Now a page of the present follows the session's
    event stream while idle too: the new turn's prompt shows up as it starts, and its answer when it ends."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [
        [response(text("First answer."))],
        [response(text("Second answer, from a turn started elsewhere."), until_file="finish")],
    ])
    first = cli("run", "first question", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                db=sqlite_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    with serving(sqlite_url, workspace) as base:
        page = browser.new_page()
        page.goto(f"{base}/ui/sessions/{sid}")
        expect = playwright_api.expect
        expect(page.locator("#status")).to_have_text("idle")
        with ThreadPoolExecutor(1) as pool:  # another process runs the next turn, as a terminal beside the browser would
            elsewhere = pool.submit(cli, "run", "second question", "--session", sid, "--json", db=sqlite_url)
            expect(page.locator("#live")).to_contain_text("second question", timeout=30_000)
            expect(page.locator("#status")).to_have_text("busy")
            (tmp_path / "finish").write_text("", encoding="utf-8")
            assert elsewhere.result(timeout=60).returncode == 0
        expect(page.locator("#conversation")).to_contain_text("Second answer, from a turn started elsewhere.", timeout=30_000)
        _close_pages(browser)


def test_viewer_pages_ask_for_no_favicon_and_log_no_error_in_the_console(sqlite_url, workspace, tmp_path, browser):
    """Every viewer page logged `Failed to load resource: … 404` for the /favicon.ico the browser asked for."""
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    ran = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(ran.stdout)[0]["session_id"]
    with serving(sqlite_url, workspace) as base:
        page = browser.new_page()
        asked: list[str] = []
        errors: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        for path in ("/", f"/ui/sessions/{sid}", f"/ui/sessions/{sid}/why"):
            page.goto(f"{base}{path}")
            page.wait_for_timeout(500)  # the browser asks for its icon after the page has loaded
        assert not [url for url in asked if "favicon" in url], asked
        assert errors == []
        _close_pages(browser)
