"""Seed 004's shared notes: the agents of one delegation tree leave each other notes with list_notes, read_note,
write_note and delete_note; `<notes_protocol>` is in the system prompt of an agent that has list_notes; `chronicle
notes` and `Chronicle.notes` show them; each write is an event naming who wrote it; `forget` erases them with the
tree. Both backends, through the CLI and the scripted provider."""

from __future__ import annotations

import base64
import json
import os
from uuid import UUID

from chronicle import Chronicle
from chronicle.domain.ids import notes_board_id
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script

NOTES = '["read_file", "list_notes", "read_note", "write_note", "delete_note"]'
REGISTRY = f"""
[agents.main]
tools = {NOTES}

[agents.researcher]
description = "Looks things up"
tools = ["list_notes", "read_note", "write_note"]

[agents.plain]
description = "No notes"
tools = ["read_file"]
"""


def use(id_: str, tool: str, **args: object) -> dict:
    """A tool_use block (tests.helpers.tool_use takes `name` as the tool's, and these tools take a `name`)."""
    return {"type": "tool_use", "id": id_, "name": tool, "input": args}


def run(db_url, workspace, tmp_path, main, env=None, **agents):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", main, **agents)
    done = cli("run", "plan it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url, env=env)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[0]["session_id"]


def tool_results(db_url: str, session_id: str) -> dict[str, dict]:
    """Each tool call's result in the session's history, by tool_use id."""
    found = {}
    for message in json_lines(cli("history", session_id, "--json", db=db_url).stdout):
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                found[block["tool_use_id"]] = block
    return found


def test_a_parent_and_its_sub_agent_share_notes_and_each_write_names_who_wrote_it(db_url, workspace, tmp_path):
    sid = run(db_url, workspace, tmp_path, [
        response(use("w", "write_note", name="plan", text="check the API first")),
        response(tool_use("d", "delegate", tasks=[{"agent": "researcher", "task": "follow the plan"},
                                                  {"agent": "plain", "task": "nothing"}])),
        response(use("r", "read_note", name="findings"), use("l", "list_notes")),
        response(use("x", "delete_note", name="plan")),
        response(text("done")),
    ], researcher=[
        response(use("rp", "read_note", name="plan")),
        response(use("wf", "write_note", name="findings", text="the API is v2")),
        response(use("wa", "write_note", name="findings", text="and rate-limited", append=True)),
        response(text("found it")),
    ], plain=[response(text("nothing to do"))])
    results = tool_results(db_url, sid)
    assert results["r"]["content"] == "the API is v2\nand rate-limited" and not results["r"].get("is_error")
    listed = json.loads(results["l"]["content"])["notes"]
    assert [n["name"] for n in listed] == ["findings", "plan"]

    rows = json_lines(cli("notes", sid[:8], "--json", db=db_url).stdout)
    assert [(r["name"], r["text"]) for r in rows] == [("findings", "the API is v2\nand rate-limited")]  # plan deleted
    child = rows[0]["session_id"]
    assert child != sid
    store = ChronicleStore(db_url)
    try:
        assert store.session(UUID(child)).parent_session_id == UUID(sid)  # written by the sub-agent
        assert tool_results(db_url, child)["rp"]["content"] == "check the API first"  # it read its parent's note
        events = [type(e).__qualname__ for e in store.events.get(notes_board_id(UUID(sid)))]
        assert events == ["NoteBoard.Opened", "NoteBoard.Written", "NoteBoard.Written", "NoteBoard.Written", "NoteBoard.Deleted"]
        main_spec = store.session(UUID(sid)).spec
        assert "<notes_protocol>" in main_spec.system_prompt
        children = {store.session(UUID(c)).spec.name: store.session(UUID(c)).spec for c in
                    {r["session_id"] for r in json_lines(cli("sessions", "--json", db=db_url).stdout)} - {sid}}
        assert "<notes_protocol>" in children["researcher"].system_prompt
        assert "<notes_protocol>" not in children["plain"].system_prompt  # no list_notes, no protocol
        # seed 004's order: a sub-agent's <completion_protocol> before its <notes_protocol>; the top level has none
        researcher = children["researcher"].system_prompt
        assert researcher.index("<completion_protocol>") < researcher.index("<notes_protocol>")
        assert "<completion_protocol>" in children["plain"].system_prompt and "<completion_protocol>" not in main_spec.system_prompt
    finally:
        store.close()
    with Chronicle(db_url) as app:
        assert app.notes(sid) == rows
    table = cli("notes", sid, db=db_url)
    assert table.returncode == 0 and "findings" in table.stdout and "rate-limited" in table.stdout
    # The log shows each write, as the session's (the board is its tree's top-level session's)
    logged = [(e["event"], e["data"].get("name")) for e in json_lines(cli("log", sid, "--json", db=db_url).stdout)
              if e["aggregate"] == "notes"]
    assert logged == [("Opened", None), ("Written", "plan"), ("Written", "findings"), ("Written", "findings"), ("Deleted", "plan")]


def test_a_bad_note_request_is_the_tool_s_error_and_the_turn_goes_on(db_url, workspace, tmp_path):
    sid = run(db_url, workspace, tmp_path, [
        response(use("u", "read_note", name="missing"), use("b", "write_note", name="no spaces", text="x"),
                 use("t", "write_note", name="big", text="x" * 40_000), use("d", "delete_note", name="missing")),
        response(text("noted the errors")),
    ])
    results = tool_results(db_url, sid)
    assert all(results[k].get("is_error") for k in "ubtd"), results
    assert "no note named 'missing'" in results["u"]["content"] and "name" in results["b"]["content"]
    assert "at most 32,000" in results["t"]["content"]
    assert json_lines(cli("notes", sid, "--json", db=db_url).stdout) == []
    assert cli("notes", sid, db=db_url).stdout.startswith("no notes yet")


def test_forget_erases_the_notes_with_their_tree(db_url, workspace, tmp_path, monkeypatch):
    env = {"CHRONICLE_CIPHER_KEY": base64.b64encode(os.urandom(32)).decode()}
    sid = run(db_url, workspace, tmp_path, [response(use("w", "write_note", name="secret-plan", text="NOTE-TEXT-OF-FORGOTTEN")),
                                             response(text("ok"))], env=env)
    assert json_lines(cli("notes", sid, "--json", db=db_url, env=env).stdout)[0]["text"] == "NOTE-TEXT-OF-FORGOTTEN"
    forgot = cli("forget", sid, "--yes", db=db_url, env=env)
    assert forgot.returncode == 0, forgot.stderr
    gone = cli("notes", sid, "--json", db=db_url, env=env)
    assert gone.returncode == 1 and "forgotten" in gone.stderr
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", env["CHRONICLE_CIPHER_KEY"])
    store = ChronicleStore(db_url)
    try:
        rows = store.recorder.select_events(notes_board_id(UUID(sid)))
        assert rows and all(b"NOTE-TEXT-OF-FORGOTTEN" not in bytes(r.state) for r in rows)
    finally:
        store.close()


def test_the_notes_travel_with_an_exported_session_and_verify_checks_them(db_url, workspace, tmp_path):
    sid = run(db_url, workspace, tmp_path, [response(use("w", "write_note", name="plan", text="carried along")), response(text("ok"))])
    assert json.loads(cli("verify", sid, "--json", db=db_url).stdout)["ok"] is True
    bundle = tmp_path / "bundle.json"
    assert cli("export", sid, "--out", str(bundle), db=db_url).returncode == 0
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    imported = cli("import", str(bundle), db=elsewhere)
    assert imported.returncode == 0, imported.stderr
    assert [(r["name"], r["text"]) for r in json_lines(cli("notes", sid, "--json", db=elsewhere).stdout)] == [("plan", "carried along")]


def test_the_server_serves_the_notes_and_the_session_page_shows_them_escaped(db_url, workspace, tmp_path):
    import httpx

    from tests.server.serving import serving

    sid = run(db_url, workspace, tmp_path, [response(use("w", "write_note", name="plan", text="<b>bold</b> plan")),
                                            response(text("ok"))])
    with serving(db_url, workspace) as base:
        rows = httpx.get(f"{base}/sessions/{sid}/notes").json()
        assert [(r["name"], r["text"]) for r in rows] == [("plan", "<b>bold</b> plan")]
        page = httpx.get(f"{base}/ui/sessions/{sid}").text
        assert 'id="notes"' in page and "&lt;b&gt;bold&lt;/b&gt; plan" in page and "<b>bold</b>" not in page


def test_chat_shows_the_notes_with_a_slash_command(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", [[response(use("w", "write_note", name="plan", text="first the tests")),
                                                 response(text("noted"))]])
    before = cli("chat", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url, input="/notes\n/quit\n")
    assert before.returncode == 0 and "no notes yet" in before.stdout, before.stdout + before.stderr
    done = cli("chat", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url,
               input="plan it\n/notes\n/notes 1\n/notes 2\n/quit\n")
    assert done.returncode == 0, done.stderr
    # the write_note call as it ran, then /notes and /notes 1
    assert done.stdout.count("first the tests") == 3 and "Traceback" not in done.stdout + done.stderr, done.stdout
    assert "error:" in done.stdout and "TURN must be 1..1" in done.stdout, done.stdout  # refused as notes --at refuses
