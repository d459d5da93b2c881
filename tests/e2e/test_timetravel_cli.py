"""Undo, redo, history as of the past, fork and replay, driven through the real CLI on both backends."""

from __future__ import annotations

import json
from pathlib import Path

from chronicle.runtime.actor import process_actor
from chronicle.runtime.compression import SizedZlib
from tests.helpers import cli, json_lines, response, text, tool_use


def turns_script(path: Path, turns: list[list[dict]]) -> Path:
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return path


def three_turns(tmp_path: Path) -> Path:
    return turns_script(tmp_path / "s.json", [
        [response(tool_use("r1", "read_file", path="hello.txt")), response(tool_use("w1", "write_file", path="notes.txt", content="v1")),
         response(text("turn one done"))],
        [response(tool_use("e2", "edit_file", path="notes.txt", old="v1", new="v2")), response(text("turn two done"))],
        [response(text("turn three done"))],
        [response(text("turn four done"))],
    ])


def run_turns(db: str, workspace: Path, script: Path, prompts: list[str]) -> str:
    first = cli("run", prompts[0], "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    for prompt in prompts[1:]:
        more = cli("run", prompt, "--session", sid, "--workspace", str(workspace), db=db)
        assert more.returncode == 0, more.stderr
    return sid


def user_texts(messages: list[dict]) -> list[str]:
    return [b["text"] for m in messages if m["role"] == "user" for b in m["content"] if b["type"] == "text"]


def history(db: str, sid: str, *extra: str) -> list[dict]:
    result = cli("history", sid, "--json", *extra, db=db)
    assert result.returncode == 0, result.stderr
    return json_lines(result.stdout)


def test_undo_hides_turns_from_history_redo_restores_them_and_a_new_input_starts_a_branch(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two", "three"])
    undone = cli("undo", sid, "--turns", "2", "--json", db=db_url)
    assert undone.returncode == 0, undone.stderr
    assert len(json_lines(undone.stdout)[0]["undone"]) == 2
    assert user_texts(history(db_url, sid)) == ["one"]

    assert cli("redo", sid, db=db_url).returncode == 0
    assert user_texts(history(db_url, sid)) == ["one", "two", "three"]

    assert cli("undo", sid, db=db_url).returncode == 0
    branch = cli("run", "four", "--session", sid, "--workspace", str(workspace), db=db_url)
    assert branch.returncode == 0, branch.stderr
    assert user_texts(history(db_url, sid)) == ["one", "two", "four"]
    nothing = cli("redo", sid, db=db_url)
    assert nothing.returncode == 1 and "nothing to redo" in nothing.stderr

    log = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    inputs = [e["data"]["input_text"] for e in log if e["aggregate"] == "turn" and e["event"] == "Created"]
    assert inputs == ["one", "two", "three", "four"]
    assert [e["event"] for e in log if e["event"] in ("TurnsUndone", "TurnsRedone")] == ["TurnsUndone", "TurnsRedone", "TurnsUndone"]


def test_undo_files_restores_what_the_undone_turns_wrote_and_records_it(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two"])
    assert (workspace / "notes.txt").read_text() == "v2"
    one = cli("undo", sid, "--files", db=db_url)
    assert one.returncode == 0, one.stderr
    assert (workspace / "notes.txt").read_text() == "v1"
    assert f"`chronicle redo {sid} --files` puts them and their files back" in one.stdout, one.stdout  # not the turns alone
    assert cli("redo", sid, db=db_url).returncode == 0
    (workspace / "notes.txt").write_text("v2")
    both = cli("undo", sid, "--turns", "2", "--files", db=db_url)
    assert both.returncode == 0, both.stderr
    assert not (workspace / "notes.txt").exists()  # turn one created it
    restored = [e for e in json_lines(cli("log", sid, "--json", db=db_url).stdout) if e["event"] == "FilesRestored"]
    assert [r["data"]["files"] for r in restored] == [[{"path": "notes.txt", "action": "restored"}], [{"path": "notes.txt", "action": "deleted"}]]


def test_undo_and_redo_files_on_a_workspace_that_is_not_there_name_the_path_not_a_file(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two"])
    gone = tmp_path / "nonexistent"
    refused = cli("undo", sid, "--files", "--workspace", str(gone), db=db_url)
    assert refused.returncode == 2 and f"--workspace {gone} is not a directory" in refused.stderr, refused.stderr
    assert "changed" not in refused.stderr and user_texts(history(db_url, sid)) == ["one", "two"]
    assert cli("undo", sid, "--files", db=db_url).returncode == 0
    moved = tmp_path / "moved"
    workspace.rename(moved)
    recorded = cli("redo", sid, "--files", db=db_url)
    assert recorded.returncode == 2 and f"the session's workspace {workspace} is not a directory any more" in recorded.stderr
    assert cli("redo", sid, "--files", "--workspace", str(moved), db=db_url).returncode == 0
    assert (moved / "notes.txt").read_text() == "v2"


def test_undo_files_refuses_naming_a_file_someone_changed_since_and_records_nothing(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two"])
    (workspace / "notes.txt").write_text("edited by a person")
    refused = cli("undo", sid, "--files", db=db_url)
    assert refused.returncode == 1
    assert "notes.txt" in refused.stderr
    assert (workspace / "notes.txt").read_text() == "edited by a person"
    assert user_texts(history(db_url, sid)) == ["one", "two"]
    assert not [e for e in json_lines(cli("log", sid, "--json", db=db_url).stdout) if e["event"] == "TurnsUndone"]


def test_history_at_a_turn_and_at_a_version_shows_the_conversation_as_it_was(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two", "three"])
    assert cli("undo", sid, "--turns", "2", db=db_url).returncode == 0
    at_two = history(db_url, sid, "--at", "2")
    assert user_texts(at_two) == ["one", "two"]
    assert at_two[-1] == {"role": "assistant", "content": [{"type": "text", "text": "turn two done"}]}
    assert user_texts(history(db_url, sid, "--at", "1")) == ["one"]

    session_events = [e for e in json_lines(cli("log", sid, "--json", db=db_url).stdout) if e["aggregate"] == "session"]
    started_two = next(e["version"] for e in session_events if e["event"] == "TurnStarted" and e["data"]["input_id"]
                       and e["version"] > 3)
    as_started = history(db_url, sid, "--version", str(started_two))
    assert user_texts(as_started) == ["one", "two"]
    assert as_started[-1]["role"] == "user"  # turn two had only its input then
    assert user_texts(history(db_url, sid, "--version", "1")) == []
    bad = cli("history", sid, "--at", "9", db=db_url)
    assert bad.returncode == 2 and "1..3" in bad.stderr, "a moment that does not exist is a usage error"
    assert cli("history", sid, "--version", "999", db=db_url).returncode == 2
    assert cli("fork", sid, "--at", "9", db=db_url).returncode == 2
    too_many = cli("undo", sid, "--turns", "9", db=db_url)
    assert too_many.returncode == 2 and "cannot undo 9" in too_many.stderr


def test_fork_starts_a_session_from_a_past_turn_that_can_run_on_its_own(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two"])
    assert "fork of" not in cli("sessions", db=db_url).stdout  # no fork, no column for one
    narrow = {"COLUMNS": "80"}
    before = cli("sessions", db=db_url, env=narrow).stdout.splitlines()[0].split()
    assert "created" in before and "model" in before
    forked = cli("fork", sid, "--at", "1", db=db_url)
    assert forked.returncode == 0, forked.stderr
    child = forked.stdout.strip()
    rows = {r["session_id"]: r for r in json_lines(cli("sessions", "--json", db=db_url).stdout)}
    assert rows[child]["forked_from"] == {"session_id": sid, "turn": 1, "actor": process_actor()}
    # The table says so too: a fork read as one more session of the same agent.
    header, *lines = cli("sessions", db=db_url).stdout.splitlines()
    table = {line.split()[0]: line for line in lines}
    assert "fork of" in header and f"{sid[:8]} @ turn 1" in table[child[:8]] and "@ turn" not in table[sid[:8]]
    # on a narrow terminal the fork's column gives way first: the columns every listing has stay where they were
    assert cli("sessions", db=db_url, env=narrow).stdout.splitlines()[0].split() == before
    assert user_texts(history(db_url, child)) == ["one"]
    # The fork's first own turn is turn 2 (one numbering everywhere: inherited turns first), so turn 2 of the script answers it.
    script = turns_script(tmp_path / "fork.json", [[response(text("not asked"))], [response(text("fork answer"))]])
    ran = cli("run", "on the fork", "--session", child, "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert ran.returncode == 0, ran.stderr
    assert user_texts(history(db_url, child)) == ["one", "on the fork"]
    assert user_texts(history(db_url, sid)) == ["one", "two"]


def test_fork_without_at_continues_from_the_end_of_the_active_branch_in_the_cli_the_library_and_the_api(db_url, workspace, tmp_path):
    """`--at` is optional, as `Chronicle.fork(session)`'s `at` is: the default is the last turn on the active branch (an
    undone turn is not on it), and the API's fork without `at` says which turn it forked at, as the fork records it."""
    import httpx

    from chronicle import Chronicle
    from tests.server.serving import serving

    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two", "three"])
    assert "default: the last turn on the active branch" in " ".join(cli("fork", "--help").stdout.split())
    assert cli("undo", sid, db=db_url).returncode == 0
    forked = cli("fork", sid, "--json", db=db_url)
    assert forked.returncode == 0, forked.stderr
    child = json_lines(forked.stdout)[0]
    assert child["forked_from"] == {"session_id": sid, "turn": 2, "actor": process_actor()}
    assert user_texts(history(db_url, child["session_id"])) == ["one", "two"]
    with Chronicle(db_url) as app:
        by_library = app.fork(sid)
        assert {r["session_id"]: r for r in app.sessions()}[by_library]["forked_from"]["turn"] == 2
    with serving(db_url, workspace) as base:
        by_api = httpx.post(f"{base}/sessions/{sid}/fork", headers={"Content-Type": "application/json"})  # no body: as `fork`
    assert by_api.status_code == 200, by_api.text
    assert by_api.json()["forked_from"] == {"session_id": sid, "turn": 2, "actor": process_actor()}  # `fork --json`'s
    assert user_texts(history(db_url, by_api.json()["session_id"])) == ["one", "two"]


def test_a_fork_at_a_turn_an_undo_took_back_is_made_and_says_so(db_url, workspace, tmp_path):
    """`fork --at` counts undone turns as `history --at` does: forking one carries on what was taken back (no redo
    needed), and is said, since the parent's branch no longer reads that way; a fork at a turn on the branch says nothing."""
    import warnings

    from chronicle import Chronicle, ChronicleWarning

    script = three_turns(tmp_path)
    sid = run_turns(db_url, workspace, script, ["one", "two"])
    assert cli("undo", sid, db=db_url).returncode == 0
    more = cli("run", "three", "--session", sid, "--workspace", str(workspace), db=db_url)
    assert more.returncode == 0, more.stderr
    forked = cli("fork", sid, "--at", "2", db=db_url)
    assert forked.returncode == 0, forked.stderr
    assert f"note: turn 2 of session {sid} was undone since" in " ".join(forked.stderr.split()), forked.stderr
    assert user_texts(history(db_url, forked.stdout.strip())) == ["one", "two"]
    plain = cli("fork", sid, "--at", "3", db=db_url)
    assert plain.returncode == 0 and "note:" not in plain.stderr, plain.stderr
    with Chronicle(db_url) as app, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app.fork(sid, at=2)
        app.fork(sid, at=1)
    assert [str(w.message)[:27] for w in caught if issubclass(w.category, ChronicleWarning)] == ["turn 2 of session " + sid[:9]]
    import httpx

    from tests.server.serving import serving

    with serving(db_url, workspace) as base:  # the API's fork says it in a `note` field
        undone, kept = (httpx.post(f"{base}/sessions/{sid}/fork", json={"at": at}).json() for at in (2, 3))
    assert undone["note"].startswith(f"turn 2 of session {sid} was undone since") and "note" not in kept
    assert user_texts(history(db_url, undone["session_id"])) == ["one", "two"]


def test_replay_of_an_unchanged_session_is_identical_and_a_changed_read_only_result_is_named(db_url, workspace, tmp_path):
    sid = run_turns(db_url, workspace, three_turns(tmp_path), ["one", "two"])
    before = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    same = cli("replay", sid, db=db_url)
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith("identical") and len(same.stdout.strip().splitlines()) == 1
    assert json_lines(cli("log", sid, "--json", db=db_url).stdout) == before  # replay writes nothing

    (workspace / "hello.txt").write_text("somebody changed this\n")
    changed = cli("replay", sid, "--json", db=db_url)
    assert changed.returncode == 1
    verdict = json_lines(changed.stdout)[0]
    assert verdict["divergence"]["turn"] == 1 and verdict["divergence"]["step"] == 0
    assert verdict["divergence"]["kind"] == "tool result" and "read_file" in verdict["divergence"]["detail"]


def test_replay_detects_a_request_that_no_longer_matches_its_fingerprint(sqlite_url, workspace, tmp_path):
    sid = run_turns(sqlite_url, workspace, three_turns(tmp_path), ["one"])
    import sqlite3

    path = sqlite_url[len("sqlite://"):]
    with sqlite3.connect(path) as conn:  # tamper with a recorded input, as a schema change might
        rows = conn.execute("SELECT rowid, state FROM stored_events WHERE topic LIKE '%Turn.Created'").fetchall()
        rowid, state = rows[0]
        plain = SizedZlib()  # states are stored compressed (runtime/compression.py)
        edited = plain.compress(plain.decompress(bytes(state)).replace(b'"one"', b'"uno"'))
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (edited, rowid))
    diverged = cli("replay", sid, db=sqlite_url)
    assert diverged.returncode == 1
    assert "turn 1, step 0: request fingerprint" in diverged.stdout


def test_undo_files_says_bash_is_not_reverted_and_redo_warns_that_files_are_not_reapplied(db_url, workspace, tmp_path):
    script = turns_script(tmp_path / "b.json", [
        [response(tool_use("b1", "bash", command="echo x > made.txt")), response(tool_use("w1", "write_file", path="n.txt", content="v1")),
         response(text("done"))],
    ])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    sid = json_lines(ran.stdout)[0]["session_id"]
    undone = cli("undo", sid, "--files", db=db_url)
    assert undone.returncode == 0, undone.stderr
    assert "1 `bash` command(s) those turns ran are not reverted" in undone.stderr
    assert not (workspace / "n.txt").exists() and (workspace / "made.txt").exists()
    redone = cli("redo", sid, "--json", db=db_url)
    assert redone.returncode == 0 and json_lines(redone.stdout)[0]["session_id"] == sid
    assert "warning: the redone turns changed files that are still as undo --files left them (n.txt)" in redone.stderr
    assert "n.txt" in json_lines(redone.stdout)[0]["warning"] and json_lines(redone.stdout)[0]["files"] == []
    plain = cli("undo", sid, db=db_url)
    assert plain.returncode == 0 and "not reverted" not in plain.stderr

    # The way back the warning names: redo --files writes what the turn wrote, bash is said not to re-run.
    again = cli("redo", sid, "--files", "--json", db=db_url)
    assert again.returncode == 0, again.stderr
    assert json_lines(again.stdout)[0]["files"] == [{"path": "n.txt", "action": "reapplied"}]
    assert "warning" not in json_lines(again.stdout)[0]
    assert "1 `bash` command(s) those turns ran are not re-run" in again.stderr
    assert (workspace / "n.txt").read_text(encoding="utf-8") == "v1"
    audit = [r["kind"] for r in json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)]
    assert "files_restored" in audit and "files_reapplied" in audit
    replayed = cli("replay", sid, "--workspace", str(workspace), db=db_url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_redo_files_refuses_by_name_with_exit_1_when_a_file_changed_since_the_undo(db_url, workspace, tmp_path):
    script = turns_script(tmp_path / "w.json", [[response(tool_use("w1", "write_file", path="n.txt", content="v1")), response(text("done"))]])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(ran.stdout)[0]["session_id"]
    assert cli("undo", sid, "--files", db=db_url).returncode == 0
    (workspace / "n.txt").write_text("mine", encoding="utf-8")
    refused = cli("redo", sid, "--files", db=db_url)
    assert refused.returncode == 1 and "n.txt was changed after undo put it back" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert (workspace / "n.txt").read_text(encoding="utf-8") == "mine"
    events = [e["event"] for e in json_lines(cli("log", sid, "--json", db=db_url).stdout)]
    assert "TurnsRedone" not in events and "FilesReapplied" not in events


def test_replay_reads_files_as_they_were_when_the_turn_ran_through_edits_undos_and_undone_files(db_url, workspace, tmp_path):
    (workspace / "notes.txt").write_text("draft v0\n", encoding="utf-8")
    two = [response(tool_use("r2", "read_file", path="extra.txt")), response(tool_use("w2", "write_file", path="extra.txt", content="x\n")),
           response(text("two"))]
    three = [response(tool_use("r3", "glob", pattern="**/*.txt")), response(tool_use("w3", "write_file", path="made/deep/a.txt", content="a\n")),
             response(text("three"))]
    # Scripts are indexed by turn number, which counts every turn the session ran (undone ones too).
    script = turns_script(tmp_path / "rw.json", [
        [response(tool_use("r1", "read_file", path="notes.txt")), response(tool_use("e1", "edit_file", path="notes.txt", old="v0", new="v1")),
         response(tool_use("l1", "list_dir", path=".")), response(text("one"))],
        two, two,  # undone without --files: the second run reads what the first wrote
        three, three,  # undone with --files: the second run does not see the first one's file
        [response(tool_use("r4", "read_file", path="notes.txt"), tool_use("g4", "grep", pattern="v[0-9]")),
         response(tool_use("e4", "edit_file", path="notes.txt", old="v1", new="v2")), response(text("four"))],
    ])
    sid = run_turns(db_url, workspace, script, ["one", "two"])
    assert cli("undo", sid, db=db_url).returncode == 0
    for prompt in ["two again", "three"]:
        assert cli("run", prompt, "--session", sid, "--workspace", str(workspace), db=db_url).returncode == 0
    undone = cli("undo", sid, "--files", db=db_url)
    assert undone.returncode == 0, undone.stderr
    for prompt in ["three again", "four"]:
        assert cli("run", prompt, "--session", sid, "--workspace", str(workspace), db=db_url).returncode == 0
    assert (workspace / "notes.txt").read_text() == "draft v2\n"

    same = cli("replay", sid, "--json", db=db_url)
    assert same.returncode == 0, same.stdout + same.stderr
    verdict = json_lines(same.stdout)[0]
    assert verdict["identical"] is True and verdict["turns"] == 4, verdict
    assert (workspace / "notes.txt").read_text() == "draft v2\n"  # the real workspace is left alone
    assert sorted(p.name for p in workspace.iterdir()) == sorted(["hello.txt", "notes.txt", "extra.txt", "made"])


def test_the_commands_undo_and_steer_offer_stay_on_one_line_in_a_narrow_terminal(sqlite_url, workspace, tmp_path):
    # A command split by rich's wrapping at the terminal's width cannot be pasted back; the shell wraps a soft line.
    sid = run_turns(sqlite_url, workspace, three_turns(tmp_path), ["one"])
    narrow = {"COLUMNS": "60"}
    undone = cli("undo", sid, db=sqlite_url, env=narrow)
    assert undone.returncode == 0, undone.stderr
    assert f"`chronicle redo {sid}` puts them back" in undone.stdout.splitlines()[0]
    queued = cli("steer", sid, "later", db=sqlite_url, env=narrow)
    assert queued.returncode == 0, queued.stderr
    assert f"`chronicle resume {sid}` runs it now" in queued.stdout.splitlines()[0]
    assert f"`chronicle chat --session {sid}`, before your next message)." in queued.stdout.splitlines()[0]


def test_history_of_an_empty_branch_says_why_it_is_empty_instead_of_printing_nothing(db_url, workspace, tmp_path):
    script = three_turns(tmp_path)
    sid = run_turns(db_url, workspace, script, ["one"])
    assert cli("undo", sid, db=db_url).returncode == 0
    empty = cli("history", sid, db=db_url)
    assert empty.returncode == 0 and empty.stdout == ""
    assert "no messages on its branch" in empty.stderr and f"redo {sid}" in empty.stderr
    assert cli("history", sid, "--json", db=db_url).stdout == ""  # JSON lines: no line, no note in the data
    before = cli("history", sid, "--version", "1", db=db_url)
    assert before.returncode == 0 and "no messages as of event 1" in before.stderr

    submitted = cli("submit", "later", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    waiting = cli("history", submitted.stdout.strip(), db=db_url)
    assert "no messages yet: 1 input(s) wait to run" in waiting.stderr
