"""The HTTP service, driven as a client would: a real server process, real HTTP, both backends."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.recovery import wait_for
from tests.server.serving import after_id, serving, sse


def test_a_run_started_over_http_streams_its_events_and_a_reconnect_misses_nothing(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
        response(text("It says hello.")),
    ])
    with serving(db_url, workspace) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "what is in hello.txt?", "provider": f"scripted:{script}"})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        assert set(created.json()) == {"session_id", "input_id", "notes"} and created.json()["notes"] == []

        events = sse(base, f"/sessions/{sid}/events")
        types = [e["type"] for _, e in events]
        assert types[0] == "agent_start" and types[-1] == "agent_end" and events[-1][1]["status"] == "completed"
        assert "tool_start" in types and "tool_end" in types and "turn_end" in types
        ids = [i for i, _ in events if i is not None]
        assert ids == sorted(set(ids)) and events[-1][0] is not None, "one id per log position, on its last message"
        assert events[0][0] is None, "agent_start, turn_start and status_change share a position: only the last has the id"

        cut = ids[len(ids) // 2]
        again = sse(base, f"/sessions/{sid}/events", headers={"Last-Event-ID": str(cut)})
        assert again == after_id(events, cut)
        # A client that dropped in the middle of a group resumes from the position before it and misses nothing.
        before_group = sse(base, f"/sessions/{sid}/events", headers={"Last-Event-ID": str(ids[0] - 1)})
        assert before_group == events
        # A Last-Event-ID is checked as ?after= is: `-5` was taken as 0 and sent the whole past again.
        for bad, said in (("-5", "a log position is 0 or more"), ("x", "not a log position"), ("1.5", "not a log position"),
                          (str(2**63), "a log position is at most")):
            refused = httpx.get(f"{base}/sessions/{sid}/events", headers={"Last-Event-ID": bad})
            assert refused.status_code == 422 and refused.json()["code"] == 2, (bad, refused.text)
            assert refused.json()["problems"][0]["field"] == "header.Last-Event-ID", refused.text
            assert said in refused.json()["error"], refused.text
        assert httpx.get(f"{base}/sessions/{sid}/events", params={"after": -3}).status_code == 422
        # One past the log's end is no id this store sent (another store's, a restored one's): said, not waited on.
        head = max(i for i, _ in events if i is not None)
        for beyond in ({"headers": {"Last-Event-ID": str(head + 1000)}}, {"params": {"after": head + 1000}}):
            refused = httpx.get(f"{base}/sessions/{sid}/events", timeout=10, **beyond)  # type: ignore[arg-type]
            assert refused.status_code == 400 and refused.json()["code"] == 2, refused.text
            assert f"log position {head + 1000} is past the end of this store's log" in refused.json()["error"]
        assert sse(base, f"/sessions/{sid}/events?follow=false", headers={"Last-Event-ID": str(head)}) == [], "the head: nothing more"

        history = httpx.get(f"{base}/sessions/{sid}/history").json()
        assert history == json_lines(cli("history", sid, "--json", db=db_url).stdout)
        listed = httpx.get(f"{base}/sessions").json()
        assert [s["session_id"] for s in listed] == [sid] and listed[0]["status"] == "idle"
        assert httpx.get(f"{base}/sessions/{sid}/cost").json()[0]["scope"] == "self"
        assert any(row["kind"] == "tool_call" for row in httpx.get(f"{base}/sessions/{sid}/audit").json())

        queued = httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "and again?"})
        assert queued.status_code == 202 and queued.json()["session_id"] == sid


def test_approval_fork_and_bad_requests_over_http(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(tool_use("tu_b", "bash", command="echo approved > out.txt")),
        response(text("Done.")),
    ])
    with serving(db_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "run it", "provider": f"scripted:{script}"}).json()["session_id"]
        wait_for(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "awaiting_approval"
                  or any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()), timeout=60)
        nameless = httpx.post(f"{base}/sessions/{sid}/approve", json={}, headers={"X-Chronicle-Actor": "x" * 101})
        assert nameless.status_code == 422 and "X-Chronicle-Actor" in nameless.json()["error"]
        garbled = httpx.post(f"{base}/sessions/{sid}/approve", json={}, headers={"X-Chronicle-Actor": b"Jos\xe9"})  # latin-1
        assert garbled.status_code == 422 and "UTF-8" in garbled.json()["error"]
        approved = httpx.post(f"{base}/sessions/{sid}/approve", json={},
                              headers={"X-Chronicle-Actor": "José Müller@ops".encode()})  # as UTF-8, as clients send it
        assert approved.status_code == 200, approved.text
        assert [(r["name"], r["status"]) for r in approved.json()] == [("bash", "approved")]
        decision = next(a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "approval")
        assert decision["detail"]["actor"] == "José Müller@ops", "the HTTP caller is recorded as who decided, as written"
        events = sse(base, f"/sessions/{sid}/events")
        assert events[-1][1]["type"] == "agent_end" and events[-1][1]["status"] == "completed"
        assert (workspace / "out.txt").read_text().strip() == "approved"

        forked = httpx.post(f"{base}/sessions/{sid}/fork", json={"at": 1}, headers={"X-Chronicle-Actor": "carol@ops"})
        assert forked.status_code == 200, forked.text
        new_id = forked.json()["session_id"]
        # who forked is the caller, as for every other decision, and the reply is `fork --json`'s object
        assert forked.json()["forked_from"] == {"session_id": sid, "turn": 1, "actor": "carol@ops"}
        assert [s for s in httpx.get(f"{base}/sessions").json() if s["session_id"] == new_id][0]["forked_from"]["actor"] == "carol@ops"
        assert httpx.get(f"{base}/sessions/{new_id}/history").json() == httpx.get(f"{base}/sessions/{sid}/history?at=1").json()
        # What the model was sent for the turn's second call: the command's --json, message for message.
        step = httpx.get(f"{base}/sessions/{sid}/history?at=1&step=1").json()
        assert step == json_lines(cli("history", sid, "--at", "1", "--step", "1", "--json", db=db_url).stdout)
        assert [m["role"] for m in step] == ["user", "assistant", "user"] and step[-1]["content"][0]["type"] == "tool_result"
        assert httpx.get(f"{base}/sessions/{sid}/history?at=1&step=5").status_code == 400

        bad = httpx.post(f"{base}/sessions", json={"prompt": "", "provider": "scripted:/nope.json"})
        assert bad.status_code == 422 and "prompt" in bad.json()["error"]
        typo = httpx.post(f"{base}/sessions", json={"promt": "hi"})
        assert typo.status_code == 422 and "promt" in typo.text
        missing = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": "scripted:/nope.json"})
        assert missing.status_code == 400 and "error" in missing.json()
        assert httpx.get(f"{base}/sessions/ffffffff/history").status_code == 404
        assert len(httpx.get(f"{base}/sessions").json()) == 2, "a refused request records nothing"


def test_the_hints_in_a_servers_answers_name_no_database_of_the_servers(db_url, workspace, tmp_path):
    """A command's hint names its store when a plain command would open another (runtime/pasteable.py); a server's
    answers are read by clients elsewhere, to whom its database (host, user, file path) is not theirs to know."""
    elsewhere = {"CHRONICLE_DB": f"sqlite:///{tmp_path / 'elsewhere.db'}"}  # so that a plain command would open another
    with serving(db_url, workspace, extra=("--db", db_url), env_extra=elsewhere) as base:
        unknown = httpx.get(f"{base}/sessions/ffffffff/history")
        assert unknown.status_code == 404
        said = unknown.json()["error"]
        assert "`chronicle sessions` lists them" in said and "--db" not in said, said


def test_a_token_guards_every_route_but_healthz(db_url, workspace):
    with serving(db_url, workspace, token="s3cret-token") as base:
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert httpx.head(f"{base}/healthz").status_code == 200  # as load balancers look
        assert httpx.get(f"{base}/sessions").status_code == 401
        assert httpx.get(f"{base}/sessions", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{base}/sessions", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    assert "s3cret" not in "".join(cli("log", "x", db=db_url).stderr)


def test_serving_a_public_address_without_a_token_is_refused(tmp_path):
    refused = cli("serve", "--host", "0.0.0.0", "--port", "0", db=f"sqlite:///{tmp_path / 'c.db'}")
    assert refused.returncode == 2 and "CHRONICLE_SERVER_TOKEN" in refused.stderr


def test_a_webhook_burst_from_one_sender_becomes_one_input_behind_the_running_turn(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("burst seen"))], [response(text("other"))]])
    first = cli("run", "start", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    (workspace / "chronicle.toml").write_text(f'[channels.alerts]\nsession = "{sid[:8]}"\ncoalesce_s = 1.5\n')
    with serving(db_url, workspace) as base:
        for part in ("disk 91%", "disk 95%", "disk 99%"):
            accepted = httpx.post(f"{base}/hooks/alerts", json={"text": part, "sender": "monitor"})
            assert accepted.status_code == 202 and accepted.json()["session_id"] == sid
        assert httpx.post(f"{base}/hooks/alerts", json={"message": "hello", "from": "alice"}).status_code == 202
        assert httpx.post(f"{base}/hooks/nope", json={"text": "x"}).status_code == 404
        empty = httpx.post(f"{base}/hooks/alerts", json={"sender": "monitor"})
        assert empty.status_code == 422 and "text" in empty.json()["error"]

        def inputs() -> list[str]:
            return [e["data"]["text"] for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "InputQueued"]

        wait_for(lambda: len(inputs()) == 3, timeout=30)
        assert inputs()[0] == "start"
        assert sorted(inputs()[1:]) == sorted(["disk 91%\ndisk 95%\ndisk 99%", "hello"])


def test_a_webhook_without_coalescing_is_recorded_before_it_is_answered(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("seen"))]])
    first = cli("run", "start", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    (workspace / "chronicle.toml").write_text(f'[channels.now]\nsession = "{sid[:8]}"\ncoalesce_s = 0\n'
                                              '[channels.lost]\nsession = "00000000"\ncoalesce_s = 0\n')
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        accepted = httpx.post(f"{base}/hooks/now", json={"text": "deploy done", "sender": "ci"})
        assert accepted.status_code == 202 and accepted.json()["recorded"] is True, accepted.text
        log = httpx.get(f"{base}/sessions/{sid}/log").json()  # no wait: it is in the log already
        assert [e["data"]["text"] for e in log if e["event"] == "InputQueued"] == ["start", "deploy done"]
        refused = httpx.post(f"{base}/hooks/lost", json={"text": "x"})
        assert refused.status_code >= 400 and "00000000" in refused.text


def test_a_session_may_start_as_any_agent_of_the_registry_and_an_unknown_one_is_refused(db_url, workspace, tmp_path):
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.researcher]\ndescription = "Reads and reports"\ninstructions = "Answer from the files only."\n'
                      'tools = ["read_file"]\n\n[agents.writer]\ndescription = "Writes"\n')
    script = write_script(tmp_path / "s.json", [], researcher=[response(text("Found it."))])
    with serving(db_url, workspace, extra=("--agents", str(agents))) as base:
        listed = httpx.get(f"{base}/agents").json()
        assert [(a["name"], a["source"]) for a in listed] == [("main", "file"), ("researcher", "file"), ("writer", "file")]

        created = httpx.post(f"{base}/sessions", json={"prompt": "look", "provider": f"scripted:{script}", "agent": "researcher"})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        events = sse(base, f"/sessions/{sid}/events")
        assert events[-1][1]["status"] == "completed", json.dumps(events[-1][1])
        row = httpx.get(f"{base}/sessions").json()[0]
        assert row["agent"] == "researcher" and row["turns"] == 1
        started = next(e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "Started")
        spec = started["data"]["spec"]
        assert spec["instructions"] == "Answer from the files only." and spec["depth"] == 0
        assert "read_file" in spec["tools"] and "bash" not in spec["tools"]
        assert "delegate" in spec["tools"], "the other agents of the file stay its to delegate to"

        unknown = httpx.post(f"{base}/sessions", json={"prompt": "x", "provider": f"scripted:{script}", "agent": "nobody"})
        assert unknown.status_code == 400
        assert unknown.json()["error"].startswith("agent:") and "researcher" in unknown.json()["error"]
        assert len(httpx.get(f"{base}/sessions").json()) == 1, "a refused request records nothing"


def test_a_program_serves_its_own_agents_defined_in_code(sqlite_url, workspace, tmp_path):
    import threading

    import uvicorn

    from chronicle import Agent, Chronicle
    from tests.server.serving import free_port

    script = write_script(tmp_path / "s.json", [], helper=[response(text("Hello from code."))])
    helper = Agent(name="helper", instructions="Be brief.", tools=["read_file"], provider=f"scripted:{script}")
    app = Chronicle(sqlite_url).http_app(helper, workspace=workspace)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: server.started, timeout=60)
        assert ("helper", "code") in [(a["name"], a["source"]) for a in httpx.get(f"{base}/agents").json()]
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "agent": "helper"})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        events = sse(base, f"/sessions/{sid}/events")
        assert events[-1][1]["type"] == "agent_end" and events[-1][1]["status"] == "completed", json.dumps(events[-1][1])
        assert httpx.get(f"{base}/sessions").json()[0]["agent"] == "helper"
        assert httpx.post(f"{base}/sessions", json={"prompt": "hi", "agent": "other"}).status_code == 400
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_undo_and_redo_with_files_over_http_give_the_commands_rows(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "w.json", [
        response(tool_use("tu_w", "write_file", path="made/n.txt", content="v1")),
        response(text("Wrote it.")),
    ])
    with serving(db_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "write", "provider": f"scripted:{script}"}).json()["session_id"]
        # Both from one listing: two requests could see "idle" before the turn and one turn during it.
        wait_for(lambda: (lambda row: row["status"] == "idle" and row["turns"] == 1)(httpx.get(f"{base}/sessions").json()[0]), timeout=60)
        undone = httpx.post(f"{base}/sessions/{sid}/undo", json={"files": True})
        assert undone.status_code == 200, undone.text
        assert undone.json()["files"] == [{"path": "made/n.txt", "action": "deleted"}, {"path": "made", "action": "removed directory"}]
        assert not (workspace / "made").exists()
        wrong = httpx.post(f"{base}/sessions/{sid}/redo", json={"files": "perhaps"})
        assert wrong.status_code == 422 and "files" in wrong.json()["error"]
        redone = httpx.post(f"{base}/sessions/{sid}/redo", json={"files": True})
        assert redone.status_code == 200, redone.text
        assert redone.json() == {"session_id": sid, "redone": undone.json()["undone"],
                                 "files": [{"path": "made", "action": "created directory"}, {"path": "made/n.txt", "action": "reapplied"}]}
        assert (workspace / "made" / "n.txt").read_text(encoding="utf-8") == "v1"
        nothing = httpx.post(f"{base}/sessions/{sid}/redo", json={"files": True})
        assert nothing.status_code == 409, nothing.text  # a state problem (exit 1 in the CLI)
        assert "nothing to redo" in nothing.json()["error"]


def test_a_client_that_leaves_mid_replay_is_let_go_without_a_warning_per_event(sqlite_url, workspace, tmp_path):
    """A stream wrote a whole batch of the log without once yielding to the event loop, so a client
    that closed its tab while a long session's past was replayed was written to, dead, for every
    event left in the batch: asyncio said "socket.send() raised exception" for each (8,072 lines for
    three such clients of a 300-turn session), and no other request was served meanwhile. Here the
    server's stderr is a pipe nobody reads until the end, so that flood fills it and stalls the
    server: the next client then waits in vain."""
    import socket
    import struct
    from urllib.parse import urlparse

    import pytest

    from tests.server import long_session
    from tests.server.serving import server_process, streams_ended

    sid = long_session.build(sqlite_url, workspace, tmp_path, 80)
    with server_process(sqlite_url, workspace) as (base, proc):
        address = urlparse(base)
        for _ in range(3):
            with socket.create_connection((address.hostname, address.port), timeout=10) as client:
                client.sendall(f"GET /sessions/{sid}/events HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
                received = b""
                try:
                    while b"agent_start" not in received:  # the replay has begun; then the client leaves
                        chunk = client.recv(65536)
                        assert chunk, received
                        received += chunk
                except TimeoutError:
                    pytest.fail("the server stopped answering after a client left in the middle of a replay")
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, as a closed tab
        assert httpx.get(f"{base}/sessions/{sid}/history", timeout=30).status_code == 200  # still serving
        streams_ended(base)  # every replay has stopped: nothing more is written to the clients that left
        proc.terminate()
        _, said = proc.communicate(timeout=30)
    assert "socket.send() raised exception" not in said, said[-2000:]


def test_a_workspace_whose_chronicle_toml_has_channels_runs_and_serves_new_sessions(sqlite_url, workspace, tmp_path):
    """[channels.NAME] is the server's table; the agent registry, which reads the same file, refused it
    as an unknown top-level key, so every new session (served or run) was a 400 / exit 2."""
    script = write_script(tmp_path / "s.json", [[response(text("ran"))], [response(text("served"))]])
    (workspace / "chronicle.toml").write_text('[channels.alerts]\nsession = "SOMEID"\ncoalesce_s = 2\n')
    ran = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    with serving(sqlite_url, workspace) as base:
        agents = httpx.get(f"{base}/agents")
        assert agents.status_code == 200, agents.text
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"})
        assert created.status_code == 201, created.text


def test_request_bodies_are_checked_strictly_so_a_string_is_no_yes_and_no_number(sqlite_url, workspace, tmp_path):
    """`{"always": "yes"}` was read as true and recorded a standing always-allow for bash;
    `{"turns": "2"}` was read as the number 2. Each is now a 422 naming the field, and nothing is recorded."""
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_b", "bash", command="echo hi > out.txt")),
                                                 response(text("Done."))])
    with serving(sqlite_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "run it", "provider": f"scripted:{script}"}).json()["session_id"]
        wait_for(lambda: any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()), timeout=60)
        for loose in ({"always": "yes"}, {"always": 1}, {"always": "true"}, {"tool_call": 5}):
            refused = httpx.post(f"{base}/sessions/{sid}/approve", json=loose)
            assert refused.status_code == 422, (loose, refused.text)
            assert refused.json()["error"].startswith(f"{next(iter(loose))}:"), refused.text
        log = httpx.get(f"{base}/sessions/{sid}/log").json()
        assert not [e for e in log if e["event"] in ("ToolAlwaysAllowed", "Approved")], "a refused request records nothing"
        for path, loose in (("undo", {"turns": "2"}), ("undo", {"turns": 1.0}), ("cancel", {"wait": "5"}),
                            ("steer", {"message": "go", "wait_batch": "no"}), ("fork", {"at": "1"}),
                            ("steer", {"message": "go", "turn_id": 5}), ("compact", {"keep": "1"}), ("inputs", {"prompt": 7})):
            refused = httpx.post(f"{base}/sessions/{sid}/{path}", json=loose)
            assert refused.status_code == 422, (path, loose, refused.text)
        assert httpx.post(f"{base}/sessions", json={"prompt": "x", "provider": 3}).status_code == 422
        stale = httpx.post(f"{base}/sessions/{sid}/steer", json={"message": "go", "turn_id": "00000000-0000-4000-8000-000000000000"})
        assert stale.status_code == 409 and "has no turn" in stale.json()["error"], stale.text  # an id it never had
        assert httpx.post(f"{base}/hooks/none", json={"text": ["a"]}).status_code == 422
        approved = httpx.post(f"{base}/sessions/{sid}/approve", json={"always": False})
        assert approved.status_code == 200, approved.text
        assert not [e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "ToolAlwaysAllowed"]


def test_a_browser_logs_in_once_with_the_token_in_the_url_and_a_cookie_carries_it_after(sqlite_url, workspace, tmp_path):
    """A browser cannot send `Authorization: Bearer`: `?token=` once sets an HttpOnly, SameSite=Strict
    cookie and redirects to the same URL without the token; the cookie then serves the viewer, its
    fetches and its event stream, and a state-changing request it carries needs the viewer's header."""
    script = write_script(tmp_path / "s.json", [response(text("ok"))])
    token = "s3cret-token"
    with serving(sqlite_url, workspace, token=token) as base:
        page = {"Accept": "text/html"}
        asked = httpx.get(f"{base}/", headers=page)
        assert asked.status_code == 401 and asked.headers["content-type"].startswith("text/html")
        assert "?token=" in asked.text and "Authorization: Bearer" in asked.text
        missing = httpx.get(f"{base}/sessions").json()
        assert missing["error"].startswith("missing or wrong token") and missing["code"] == 2, "every error has its code"
        assert set(httpx.get(f"{base}/ui/sessions?token=nope").json()) == {"error", "code"}
        wrong = httpx.get(f"{base}/ui/sessions?token=nope", headers=page)
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers

        login = httpx.get(f"{base}/ui/sessions?q=x&token={token}&status=idle", headers=page)
        assert login.status_code == 303 and login.headers["location"] == "/ui/sessions?q=x&status=idle"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/" in cookie and "Secure" not in cookie
        assert token not in cookie, "the cookie carries a value derived from the token, not the token"
        name, value = cookie.split(";")[0].split("=", 1)
        assert httpx.get(f"{base}/sessions", headers={"Authorization": f"Bearer {value}"}).status_code == 401
        behind_tls = httpx.get(f"{base}/?token={token}", headers={"X-Forwarded-Proto": "https"})
        assert "Secure" in behind_tls.headers["set-cookie"]
        elsewhere = httpx.get(f"{base}//evil.example/?token={token}").headers["location"]
        assert elsewhere.startswith("/") and not elsewhere.startswith("//"), "the redirect never leaves the server"

        with httpx.Client(base_url=base, cookies={name: value}) as browser:
            assert browser.get("/", headers=page).status_code == 200
            assert browser.get("/sessions").status_code == 200
            forged = browser.post("/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"})
            assert forged.status_code == 403 and "X-Chronicle-Viewer" in forged.json()["error"] and forged.json()["code"] == 2
            assert browser.get("/sessions").json() == [], "a refused request records nothing"
            created = browser.post("/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"},
                                   headers={"X-Chronicle-Viewer": "1"})
            assert created.status_code == 201, created.text
            assert browser.get("/docs").status_code == 200
        for path in ("/docs", "/openapi.json", "/docs/oauth2-redirect", "/nowhere"):
            assert httpx.get(f"{base}{path}").status_code == 401, path
        assert httpx.get(f"{base}/openapi.json", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def _raw_post(base: str, path: str, head: str, chunks: list[bytes]) -> tuple[int, dict[str, Any]]:
    """POST with headers and body parts as written (a Content-Length that lies, a chunked body):
    the status and JSON of the answer, read as soon as the server sends it."""
    import socket
    from urllib.parse import urlparse

    address = urlparse(base)
    with socket.create_connection((address.hostname, address.port), timeout=20) as client:
        client.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{head}\r\n".encode())
        for chunk in chunks:
            client.sendall(chunk)
        received = b""
        while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
            part = client.recv(65536)
            if not part:
                break
            received += part
    status_line, _, rest = received.partition(b"\r\n")
    body = rest.split(b"\r\n\r\n", 1)[1]
    return int(status_line.split()[1]), json.loads(body)


def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(sqlite_url, workspace, tmp_path):
    """A 50 MB prompt was accepted (201) and stalled every other request for 14-18 s; 155 MB of
    prompts made a 1.1 GB SQLite file. A body over CHRONICLE_SERVER_MAX_BODY_BYTES is now a 413 with
    a JSON error: at once by its Content-Length, and as soon as a chunked body passes the limit."""
    script = write_script(tmp_path / "s.json", [response(text("ok"))])
    limit = 65536
    with serving(sqlite_url, workspace, extra=("--no-worker",), env_extra={"CHRONICLE_SERVER_MAX_BODY_BYTES": str(limit)}) as base:
        big = httpx.post(f"{base}/sessions", json={"prompt": "x" * (limit + 1), "provider": f"scripted:{script}"})
        assert big.status_code == 413, big.text
        assert "65536" in big.json()["error"] and "CHRONICLE_SERVER_MAX_BODY_BYTES" in big.json()["error"]
        assert big.json()["code"] == 2, "every error answer has its code, as the chunked one's has"

        started = time.monotonic()
        status, said = _raw_post(base, "/sessions", "Content-Length: 50000000\r\n", [b'{"prompt": "' + b"x" * 1000])
        assert status == 413 and said["code"] == 2 and time.monotonic() - started < 5, "answered without waiting for 50 MB"

        piece = b"y" * 16384
        chunked = [b"%x\r\n%s\r\n" % (len(part), part) for part in [b'{"prompt": "', *[piece] * 6, b'"}']] + [b"0\r\n\r\n"]
        status, said = _raw_post(base, "/sessions", "Transfer-Encoding: chunked\r\n", chunked)
        assert status == 413 and "CHRONICLE_SERVER_MAX_BODY_BYTES" in said["error"], said
        assert httpx.get(f"{base}/sessions").json() == [], "nothing was recorded"

        small = json.dumps({"prompt": "z" * 60000, "provider": f"scripted:{script}"}).encode()
        chunked = [b"%x\r\n%s\r\n" % (len(small[i:i + 8192]), small[i:i + 8192]) for i in range(0, len(small), 8192)] + [b"0\r\n\r\n"]
        status, said = _raw_post(base, "/sessions", "Transfer-Encoding: chunked\r\n", chunked)
        assert status == 201, said
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        status, said = _raw_post(base, "/sessions", f"Content-Length: {2 * 1024 * 1024 + 1}\r\n", [b"{"])
        assert status == 413 and "2097152" in said["error"], "2 MiB by default"


def test_a_body_limit_that_cannot_work_stops_serve_on_one_line(sqlite_url, workspace):
    refused = cli("serve", "--port", "0", env={"CHRONICLE_SERVER_MAX_BODY_BYTES": "lots"}, db=sqlite_url)
    assert refused.returncode == 2 and "CHRONICLE_SERVER_MAX_BODY_BYTES" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_a_blank_token_stops_serve_on_one_line_instead_of_refusing_every_request(sqlite_url):
    refused = cli("serve", "--port", "0", env={"CHRONICLE_SERVER_TOKEN": "   "}, db=sqlite_url, timeout=30)
    assert refused.returncode == 2 and "CHRONICLE_SERVER_TOKEN" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_a_server_that_cannot_start_says_why_on_one_line_before_it_claims_to_serve(pg_database, workspace, tmp_path):
    """`serve` said "serving on …" and then printed a 30-line traceback from its first request to the
    store (or from uvicorn's bind). The store is opened and the port bound first, with the other
    commands' one-line errors."""
    import socket

    nowhere = pg_database.rsplit("/", 1)[0] + "/chronicle_no_such_db"
    missing = cli("serve", "--port", "0", "--workspace", str(workspace), db=nowhere, timeout=30)
    assert missing.returncode == 1 and "createdb" in missing.stderr, missing.stderr
    unknown = cli("serve", "--port", "0", "--workspace", str(workspace), db="mysql://x", timeout=30)
    assert unknown.returncode == 2, unknown.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = cli("serve", "--port", port, "--workspace", str(workspace), db=f"sqlite:///{tmp_path / 'c.db'}", timeout=30)
    assert busy.returncode == 2 and port in busy.stderr, busy.stderr
    for refused in (missing, unknown, busy):
        assert "serving on" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_every_error_is_json_with_error_and_code_and_malformed_json_is_said_so(sqlite_url, workspace):
    """Malformed JSON named a character offset as the field (`1: JSON decode error`), and the
    router's 404 and 405 answered `{"detail": …}`: every error is now `{"error", "code"}` (docs/server.md), the
    code being the CLI's exit code for that kind of failure; a body that is not JSON at all is said to be so."""
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        broken = httpx.post(f"{base}/sessions", content=b'{"prompt": "hi",}', headers={"Content-Type": "application/json"})
        assert broken.status_code == 400 and broken.json()["code"] == 2, broken.text
        assert broken.json()["error"].startswith("the body is not valid JSON: "), broken.text
        assert "character 16" in broken.json()["error"] and broken.json()["problems"][0]["field"] == "", broken.text
        plain = httpx.post(f"{base}/sessions", content=b"hello", headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["code"] == 2, plain.text  # the type a web page may send (cross_site.py)
        assert plain.json()["error"].startswith("Content-Type: text/plain: a request that changes something must send "
                                                "Content-Type: application/json"), plain.text
        viewer = httpx.post(f"{base}/sessions", content=b"hello", headers={"Content-Type": "text/plain", "X-Chronicle-Viewer": "1"})
        assert viewer.status_code == 400, viewer.text
        assert viewer.json()["error"] == "the body is not JSON (Content-Type: text/plain): send a JSON object as application/json"
        # Bodies FastAPI could not read other than as malformed JSON answered its own words, without `problems`.
        for body, said in (('{"prompt": "\xe9"}'.encode("latin-1"), "it is not UTF-8 text (byte 0xe9 at position 12)"),
                           (b"[" * 100_000 + b"]" * 100_000, "it is nested too deep to read")):
            unread = httpx.post(f"{base}/sessions", content=body, headers={"Content-Type": "application/json"})
            assert unread.status_code == 400 and set(unread.json()) == {"error", "code", "problems"}, unread.text
            assert unread.json()["error"].startswith(f"the body is not valid JSON: {said}"), unread.text
            assert unread.json()["code"] == 2 and unread.json()["problems"] == [{"field": "", "error": unread.json()["error"]}]
        listed = httpx.post(f"{base}/sessions", json=["hi"])
        assert listed.status_code == 422 and listed.json()["error"].startswith("the body: ") and listed.json()["code"] == 2, listed.text
        unknown = httpx.post(f"{base}/sessions", json={"prompt": "hi", "agent": "nobody"})
        assert unknown.status_code == 400 and unknown.json()["code"] == 2, unknown.text
        json_type = {"Content-Type": "application/json"}
        for answer, status in ((httpx.get(f"{base}/nowhere"), 404), (httpx.delete(f"{base}/sessions", headers=json_type), 405),
                               (httpx.get(f"{base}/ui/sessions/ffffffff"), 404)):
            assert answer.status_code == status and set(answer.json()) == {"error", "code"}, answer.text
            assert answer.json()["code"] == 2
        # /openapi.json said a 422 was FastAPI's {"detail": [...]}: a generated client parsed no refusal. It says ours now.
        document = httpx.get(f"{base}/openapi.json").json()
        schemas = document["components"]["schemas"]
        assert "HTTPValidationError" not in schemas and "detail" not in json.dumps(schemas), "FastAPI's error body is gone"
        error, problem = schemas["Error"], schemas["Problem"]
        ours = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        operations = [op for item in document["paths"].values() for op in item.values()]
        assert all(op["responses"]["default"]["content"] == ours for op in operations)
        assert document["paths"]["/sessions"]["post"]["responses"]["422"]["content"] == ours
        for answer in (listed, broken, unknown, plain):
            assert set(error["required"]) <= set(answer.json()) <= set(error["properties"]), answer.text
            for each in answer.json().get("problems", []):
                assert set(each) == set(problem["properties"]) == set(problem["required"])
        # The 405 named the first route of the path only: `Allow: GET` on /sessions, which POST creates sessions on.
        put = httpx.put(f"{base}/sessions", headers=json_type)
        assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD, POST", put.headers
        assert put.json() == {"error": "method PUT not allowed on /sessions: it takes GET, HEAD, POST", "code": 2}


def test_a_browser_gets_a_viewer_page_for_every_failure_of_a_viewer_page(sqlite_url, workspace, tmp_path):
    """A browser following a stale link saw a raw JSON object; every failure under /ui/ (an unknown session or call,
    a parameter that is not a number) is now a page with the same one line, with the same status."""
    from chronicle import Agent, Chronicle

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[{"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                                                        "usage": {"input_tokens": 1, "output_tokens": 1}}]]}}), encoding="utf-8")
    with Chronicle(sqlite_url) as app:
        sid = app.run_sync(Agent(provider=f"scripted:{script}"), "hello", workspace=workspace).session_id
    html = {"Accept": "text/html"}
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        for path, params, status, said in (("/ui/sessions/ffffffff", {}, 404, "no session"),
                                           (f"/ui/sessions/{sid}/why", {"call": "zzz"}, 404, "zzz"),
                                           (f"/ui/sessions/{sid}", {"turn": "abc"}, 422, "turn")):
            shown = httpx.get(f"{base}{path}", params=params, headers=html)
            assert shown.status_code == status and shown.headers["content-type"].startswith("text/html"), shown.text
            assert said in shown.text and "<h2>" in shown.text, shown.text
            program = httpx.get(f"{base}{path}", params=params)
            assert program.status_code == status and said in program.json()["error"], program.text
