"""Configuration that used to be accepted and then did nothing, or did something else than written: each is
refused now with one line naming it (exit 2, nothing recorded), or said in a note where refusing would break a
session already recorded."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from chronicle.runtime.store import ChronicleStore
from tests.chat_sse_server import chat_reply, chat_sse  # noqa: F401 - chat_sse is a fixture
from tests.closed_at_end import closed_at_end
from tests.e2e.delegation_helpers import HALT_TOOL, SHOP_TOOLS, died_while_the_clerk_worked, refused
from tests.helpers import cli, json_lines, response, text, tool_use


def script(path, turns):
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.mark.parametrize("toml,named", [
    ('[limits]\nmax_tool_calls = "10"\n', ("chronicle.toml: [limits] max_tool_calls: expected a whole number, got '10'",)),
    ('[limits]\nbudget_usd = "0.5"\n', ("chronicle.toml: [limits] budget_usd: expected a number, got '0.5'",)),
    ('[compaction]\nkeep_recent = "3"\n', ("[compaction] keep_recent: expected a whole number, got '3'",)),
    ('[agents.main]\nmax_iterations = "10"\n', ("chronicle.toml: agents.main.max_iterations: expected a whole number, got '10'",)),
    ('[agents.main]\nmax_depth = "1"\n', ("agents.main.max_depth: expected a whole number, got '1'",)),
    ('[limits]\nmax_iterations = 10\n', ("[limits] max_iterations: unknown key", "[agents.main]", "--max-iterations")),
])
def test_a_quoted_limit_in_chronicle_toml_exits_2_naming_key_file_and_type(sqlite_url, workspace, tmp_path, toml, named):
    (workspace / "chronicle.toml").write_text(toml, encoding="utf-8")
    provider = script(tmp_path / "s.json", [[response(text("hi"))]])
    refused(cli("run", "hello", "--provider", provider, "--workspace", str(workspace), db=sqlite_url), *named)
    assert closed_at_end(ChronicleStore(sqlite_url)).session_ids() == []


def test_a_thinking_budget_for_an_openai_compatible_session_is_refused_as_it_would_never_be_sent(db_url, workspace):
    submitted = cli("submit", "hi", "--provider", "openai-compatible", "--model", "llama3", "--workspace", str(workspace),
                    db=db_url, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert submitted.returncode == 0, submitted.stderr
    sid = submitted.stdout.split()[-1]
    line = refused(cli("model", sid, "--thinking", "2048", db=db_url), "provider openai-compatible takes no thinking budget",
                   "leave --thinking out")
    assert line.startswith("error: thinking tokens 2048")
    shown = json.loads(cli("model", sid, "--json", db=db_url).stdout)
    assert shown["thinking_tokens"] is None and shown["changed_by"] is None  # nothing recorded
    assert cli("model", sid, "--thinking", "0", db=db_url).returncode == 0  # off is what it is anyway


@pytest.mark.parametrize("toml,named", [
    ('[approvals]\nallow = ["bassh"]\n', ("chronicle.toml [approvals]: allow names 'bassh'", "its tools are bash, edit_file")),
    ('[approvals]\nrequire = ["write_fil"]\n', ("require names 'write_fil'", "write_file")),
    ('[agents.main]\ntools = ["read_file"]\n[agents.reader]\ntools = ["grep"]\n[agents.reader.approvals]\nallow = ["bash"]\n',
     ("chronicle.toml [agents.reader.approvals]: allow names 'bash'",
      "its tools are delegate, grep, list_agents, list_tasks, read_file, task_complete")),
])
def test_an_approvals_table_naming_no_tool_of_the_session_exits_2_and_records_nothing(sqlite_url, workspace, tmp_path, toml, named):
    (workspace / "chronicle.toml").write_text(toml, encoding="utf-8")
    provider = script(tmp_path / "s.json", [[response(text("hi"))]])
    refused(cli("run", "hello", "--provider", provider, "--workspace", str(workspace), db=sqlite_url), *named)
    assert closed_at_end(ChronicleStore(sqlite_url)).session_ids() == []
    refused(cli("submit", "hello", "--provider", provider, "--workspace", str(workspace), db=sqlite_url), *named)


SHOP = SHOP_TOOLS + "\n\nTOOLS = [lookup_order, refund]\n"


def test_a_tool_the_history_called_that_its_import_path_no_longer_holds_is_refused_not_dropped(db_url, workspace, tmp_path):
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")
    provider = script(tmp_path / "s.json", [
        [response(tool_use("t1", "refund", order_id="7")), response(tool_use("t2", "made_up")), response(text("refunded"))],
        [response(text("second"))],
    ])
    first = cli("run", "refund 7", "--provider", provider, "--workspace", str(workspace), "--tools", "shop_tools:TOOLS",
                "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    (workspace / "shop_tools.py").write_text(SHOP.replace("[lookup_order, refund]", "[lookup_order]"), encoding="utf-8")
    turns_before = len(closed_at_end(ChronicleStore(db_url)).session(UUID(sid)).head)
    line = refused(cli("run", "again", "--session", sid, db=db_url),
                   f"session {sid} (agent main): its history called 'refund', which shop_tools:TOOLS no longer holds",
                   "put it back there", "start a new session")
    assert "made_up" not in line  # a name the model made up was never a tool of the session
    assert cli("submit", "queued", "--session", sid, db=db_url).returncode == 0  # the input is kept, not run
    refused(cli("resume", sid, db=db_url), "its history called 'refund'")
    store = closed_at_end(ChronicleStore(db_url))
    session = store.session(UUID(sid))
    assert len(session.head) == turns_before and [q["text"] for q in session.queue] == ["queued"]
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")  # put back: the session goes on
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr


def test_chronicle_thinking_tokens_is_said_to_be_ignored_where_an_openai_compatible_session_runs(db_url, workspace, chat_sse):
    """The variable is the process's default budget (a worker's, a profile's), so it is not refused for a session
    that cannot use it: `run` and `resume` say in one note that it is ignored there, and send none."""
    chat_sse.script(chat_reply([{"type": "text", "text": "one"}]), chat_reply([{"type": "text", "text": "two"}]),
                    chat_reply([{"type": "text", "text": "three"}]))
    env = {"OPENAI_BASE_URL": chat_sse.url + "/v1", "CHRONICLE_THINKING_TOKENS": "2048"}
    note = ("note: CHRONICLE_THINKING_TOKENS=2048 ignored: provider openai-compatible takes no thinking budget "
            "(the server decides on reasoning); it applies to anthropic sessions only")
    first = cli("run", "hi", "--provider", "openai-compatible", "--model", "llama3", "--workspace", str(workspace), "--json",
                db=db_url, env=env)
    assert first.returncode == 0, first.stderr
    assert [line for line in first.stderr.splitlines() if line.startswith("note:")] == [note]
    sid = json_lines(first.stdout)[0]["session_id"]
    assert cli("submit", "again", "--session", sid, db=db_url).returncode == 0
    resumed = cli("resume", sid, db=db_url, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert [line for line in resumed.stderr.splitlines() if line.startswith("note:")] == [note]
    quiet = cli("run", "once more", "--session", sid, db=db_url, env={"OPENAI_BASE_URL": chat_sse.url + "/v1"})
    assert quiet.returncode == 0 and "CHRONICLE_THINKING_TOKENS" not in quiet.stderr, quiet.stderr
    assert all("thinking" not in r.body and "reasoning_effort" not in r.body for r in chat_sse.requests)

CLERK_TOOLS = SHOP + HALT_TOOL + "\n\nTOOLS = [lookup_order, refund, halt]\n"

CLERK_REGISTRY = """
[agents.main]
tools = ["read_file"]

[agents.clerk]
description = "Handles orders"
tools = ["shop_tools:TOOLS"]
"""


def test_a_sub_agent_continued_with_its_parent_is_refused_for_a_tool_its_history_called_that_is_gone(db_url, workspace, tmp_path):
    """A parent that died while its sub-agent worked goes on with that sub-agent when resumed: the sub-agent's own
    history is checked as the parent's is, so a called tool its path no longer holds refuses the resume, naming the
    sub-agent's session, with nothing recorded; put back, the same children finish."""
    store, child, parent = died_while_the_clerk_worked(db_url, workspace, tmp_path, CLERK_REGISTRY, CLERK_TOOLS)
    assert child.active_turn_id is not None and store.session(parent).active_turn_id is not None
    (workspace / "shop_tools.py").write_text(CLERK_TOOLS.replace("[lookup_order, refund, halt]", "[lookup_order, halt]"),
                                             encoding="utf-8")
    before = {sid: store.session(sid).version for sid in (parent, child.id)} | {"turn": store.turn(child.active_turn_id).version}
    line = refused(cli("resume", str(parent), db=db_url),
                   f"session {child.id} (sub-agent clerk of session {parent}): its history called 'refund', "
                   "which shop_tools:TOOLS no longer holds", "put it back there")
    assert "halt" not in line.split("put it back")[0].split("called")[1]
    store = closed_at_end(ChronicleStore(db_url))
    after = {sid: store.session(sid).version for sid in (parent, child.id)} | {"turn": store.turn(child.active_turn_id).version}
    assert after == before  # nothing recorded
    (workspace / "shop_tools.py").write_text(CLERK_TOOLS, encoding="utf-8")  # put back: the same child finishes
    resumed = cli("resume", str(parent), db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    store = closed_at_end(ChronicleStore(db_url))
    assert [s for s in store.session_ids() if store.session(s).parent_session_id] == [child.id]
    assert store.session(child.id).active_turn_id is None and store.session(parent).active_turn_id is None

def test_a_tool_the_session_had_but_never_called_that_its_path_no_longer_holds_is_a_note_not_a_refusal(db_url, workspace, tmp_path):
    """The spec records the names each import path held; a continued session whose path now holds fewer goes on (its
    history does not need the others) and says which are no longer offered, on run and on resume alike."""
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")
    provider = script(tmp_path / "s.json", [
        [response(tool_use("t1", "lookup_order", order_id="7")), response(text("shipped"))],
        [response(text("second"))], [response(text("third"))], [response(text("fourth"))],
    ])
    first = cli("run", "where is 7", "--provider", provider, "--workspace", str(workspace), "--tools", "shop_tools:TOOLS",
                "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    spec = closed_at_end(ChronicleStore(db_url)).session(UUID(sid)).spec
    assert spec.import_tools == {"shop_tools:TOOLS": ("lookup_order", "refund")}
    again = cli("run", "again", "--session", sid, db=db_url)
    assert again.returncode == 0 and "note:" not in again.stderr, again.stderr  # nothing gone: nothing said
    (workspace / "shop_tools.py").write_text(SHOP.replace("[lookup_order, refund]", "[lookup_order]"), encoding="utf-8")
    note = (f"note: session {sid}: shop_tools:TOOLS no longer holds 'refund', which it held when the session started; "
            "the session goes on without it (its history never called it)")
    shrunk = cli("run", "third", "--session", sid, "--json", db=db_url)
    assert shrunk.returncode == 0, shrunk.stderr
    assert [line for line in shrunk.stderr.splitlines() if line.strip()] == [note]
    assert json_lines(shrunk.stdout)[-1]["status"] == "completed"
    assert cli("submit", "queued", "--session", sid, db=db_url).returncode == 0
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0 and note in resumed.stderr.splitlines(), resumed.stderr


def test_a_worker_logs_the_ignored_thinking_budget_once_whatever_the_number_of_sessions(db_url, workspace, chat_sse):
    chat_sse.script(chat_reply([{"type": "text", "text": "one"}]), chat_reply([{"type": "text", "text": "two"}]))
    env = {"OPENAI_BASE_URL": chat_sse.url + "/v1", "CHRONICLE_THINKING_TOKENS": "2048"}
    for prompt in ("first", "second"):
        submitted = cli("submit", prompt, "--provider", "openai-compatible", "--model", "llama3", "--workspace", str(workspace),
                        db=db_url, env=env)
        assert submitted.returncode == 0, submitted.stderr
    worked = cli("worker", "--once", "--concurrency", "1", db=db_url, env=env)
    assert worked.returncode == 0, worked.stderr
    notes = [line for line in worked.stderr.splitlines() if "CHRONICLE_THINKING_TOKENS" in line]
    assert len(notes) == 1 and notes[0].endswith("note: CHRONICLE_THINKING_TOKENS=2048 ignored: provider openai-compatible "
                                                 "takes no thinking budget (the server decides on reasoning); it applies "
                                                 "to anthropic sessions only"), worked.stderr
    assert worked.stderr.count(" completed") == 2, worked.stderr


def test_a_sub_agent_records_the_tools_its_path_holds_when_it_is_spawned_so_a_called_one_gone_since_is_refused(db_url, workspace,
                                                                                                              tmp_path):
    """A sub-agent spawned after its import path grew ran with the new tool, but recorded the names of when its parent
    started: that tool, called and then taken out, was not missed when the parent was resumed with the sub-agent
    in flight (no refusal, the history's call to a tool no longer offered), and a tool taken out before the spawn
    was claimed as one it had."""
    (workspace / "chronicle.toml").write_text(CLERK_REGISTRY, encoding="utf-8")
    without_refund = CLERK_TOOLS.replace("[lookup_order, refund, halt]", "[lookup_order, halt]")
    (workspace / "shop_tools.py").write_text(without_refund, encoding="utf-8")
    task = tool_use("d1", "delegate", tasks=[{"agent": "clerk", "task": "refund order 7"}])
    provider = f"scripted:{tmp_path / 's.json'}"
    (tmp_path / "s.json").write_text(json.dumps({"agents": {
        "main": [[response(text("hello"))], [response(task), response(text("the clerk refunded it"))]],
        "clerk": [[response(tool_use("c1", "refund", order_id="7")), response(tool_use("c2", "halt", reason="check")),
                   response(tool_use("c3", "task_complete", status="completed", summary="refunded 7"))]],
    }}), encoding="utf-8")
    first = cli("run", "hello", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    [clerk] = closed_at_end(ChronicleStore(db_url)).session(UUID(sid)).spec.registry
    assert clerk.import_tools == {"shop_tools:TOOLS": ("lookup_order", "halt")}
    (workspace / "shop_tools.py").write_text(CLERK_TOOLS, encoding="utf-8")  # refund is there from now on
    (workspace / "halt.flag").write_text("", encoding="utf-8")
    died = cli("run", "refund 7", "--session", sid, db=db_url)
    assert died.returncode == 9, (died.returncode, died.stderr)
    store = closed_at_end(ChronicleStore(db_url))
    [child] = [store.session(s) for s in store.session_ids() if store.session(s).parent_session_id]
    assert child.spec.import_tools == {"shop_tools:TOOLS": ("lookup_order", "refund", "halt")}  # what it ran with
    (workspace / "halt.flag").unlink()
    (workspace / "shop_tools.py").write_text(without_refund, encoding="utf-8")
    refused(cli("resume", sid, db=db_url), f"session {child.id} (sub-agent clerk of session {sid}): its history called "
            "'refund', which shop_tools:TOOLS no longer holds", "put it back there")


def test_a_sub_agent_spawned_after_its_path_lost_a_tool_is_not_said_to_have_held_it(db_url, workspace, tmp_path):
    """The sub-agent never had the tool its path had already lost when it was spawned: resuming it with its parent
    says so of the parent's sub-agent definition (those it starts go without it), not that this one held it."""
    (workspace / "chronicle.toml").write_text(CLERK_REGISTRY, encoding="utf-8")
    (workspace / "shop_tools.py").write_text(CLERK_TOOLS, encoding="utf-8")
    task = tool_use("d1", "delegate", tasks=[{"agent": "clerk", "task": "where is order 7"}])
    provider = f"scripted:{tmp_path / 's.json'}"
    (tmp_path / "s.json").write_text(json.dumps({"agents": {
        "main": [[response(text("hello"))], [response(task), response(text("the clerk found it"))]],
        "clerk": [[response(tool_use("c1", "lookup_order", order_id="7")), response(tool_use("c2", "halt", reason="check")),
                   response(tool_use("c3", "task_complete", status="completed", summary="shipped"))]],
    }}), encoding="utf-8")
    first = cli("run", "hello", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    (workspace / "shop_tools.py").write_text(CLERK_TOOLS.replace("[lookup_order, refund, halt]", "[lookup_order, halt]"),
                                             encoding="utf-8")
    (workspace / "halt.flag").write_text("", encoding="utf-8")
    assert cli("run", "where is 7", "--session", sid, db=db_url).returncode == 9
    (workspace / "halt.flag").unlink()
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert [line for line in resumed.stderr.splitlines() if line.startswith("note:")] == [
        f"note: session {sid}: shop_tools:TOOLS of sub-agent clerk no longer holds 'refund', which it held when the session "
        "started; the sub-agents it starts now go without it"]
