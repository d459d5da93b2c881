"""`Chronicle.why` / `chronicle why` / `GET /sessions/{id}/why`: one decision's chain, from what the agent was
asked to what it did next, each part as the events recorded it, with their log positions as evidence."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Guardrail, tool
from tests.helpers import cli, response, text, tool_use

STEER_DB: list[str] = []


@tool(read_only=True)
async def peek(key: str) -> str:
    """Read a value."""
    return f"value of {key}"


@tool(requires_approval=True)
async def launch(target: str) -> str:
    """Launch something that needs a person's yes."""
    return f"launched {target}"


@tool
async def nudge() -> str:
    """Steers the running session from outside, as a person would while it works."""
    with Chronicle(STEER_DB[0]) as other:
        [row] = [s for s in other.sessions() if s["status"] == "running"]
        other.steer(row["session_id"], "use key b next")
    return "nudged"


def scripted(tmp_path, *turns, **agents) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns), **{k: list(v) for k, v in agents.items()}}}), encoding="utf-8")
    return f"scripted:{path}"


def positions_of(app: Chronicle, sid: str) -> dict[int, dict]:
    return {e["position"]: e for e in app.log(sid)}


def test_the_last_tool_call_is_explained_from_its_input_to_what_came_next(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, response(text("I will look."), tool_use("t1", "peek", key="a")),
                        response(tool_use("t2", "peek", key="b")), response(text("a and b read")))
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[peek], provider=provider), "read a then b", workspace=workspace).session_id
        chain = app.why(sid)
        assert (chain["session_id"], chain["turn"], chain["step"]) == (sid, 1, 1)
        assert chain["asked"]["input"] == "read a then b" and chain["asked"]["steering"] == []
        # What the model saw just before deciding: the first call's result, as history --at 1 --step 1 shows it.
        assert chain["saw"]["last"]["content"][0]["tool_use_id"] == "t1"
        assert chain["saw"]["last"]["content"][0]["content"] == "value of a"
        assert chain["saw"]["messages"] == len(app.history(sid, at=1, step=1))
        assert chain["decided"]["tool_uses"] == [{"id": "t2", "name": "peek", "input": {"key": "b"}}]
        call = chain["tool_call"]
        assert (call["name"], call["tool_use_id"], call["status"], call["input"]) == ("peek", "t2", "completed", {"key": "b"})
        assert call["result"] == {"content": "value of b", "is_error": False} and call["checks"] == []
        assert chain["then"]["text"] == "a and b read" and chain["then"]["stop_reason"] == "end_turn"
        assert chain["delegated_by"] is None
        # Every position given as evidence is an event of this session's log, and says what the chain claims.
        log = positions_of(app, sid)
        assert set(chain["evidence"]) <= set(log)
        assert log[chain["decided"]["position"]]["event"] == "ModelResponded"
        assert log[call["requested_position"]]["event"] == "Requested"
        assert log[call["ended_position"]]["event"] == "Completed"
        # Named by its tool_use id, by its id's prefix, or by its tool's name (its last call): the same decision.
        assert app.why(sid, "t2") == chain == app.why(sid, call["tool_call_id"][:8]) == app.why(sid, "peek")
        first = app.why(sid, "t1")
        assert first["step"] == 0 and first["decided"]["text"] == "I will look."
        assert first["saw"]["last"] == {"role": "user", "content": [{"type": "text", "text": "read a then b"}]}
        assert first["then"]["tool_uses"][0]["id"] == "t2"


def test_a_turns_final_answer_is_explained_with_turn_alone(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [response(tool_use("t1", "peek", key="a")), response(text("it is a"))],
                        [response(text("second answer"))])
    with Chronicle(db_url) as app:
        agent = Agent(tools=[peek], provider=provider)
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        app.run_sync(agent, "second", session=sid, workspace=workspace)
        chain = app.why(sid, turn=1)
        assert (chain["turn"], chain["step"], chain["tool_call"]) == (1, 1, None)
        assert chain["decided"]["text"] == "it is a" and chain["then"] == {"turn_status": "completed", "final_text": "it is a",
                                                                        "reason": None}
        assert app.why(sid)["turn"] == 1  # the last tool call of the branch is in turn 1: turn 2 called none
        with pytest.raises(ChronicleError) as no_call:
            app.why(sid, turn=2, call="peek")
        assert no_call.value.code == 2 and "no tool call 'peek' on turn 2" in str(no_call.value)
        with pytest.raises(ChronicleError) as out_of_range:
            app.why(sid, turn=3)
        assert out_of_range.value.code == 2 and "--turn takes 1 to 2" in str(out_of_range.value)
        with pytest.raises(ChronicleError) as unknown:
            app.why(sid, "t9")
        assert unknown.value.code == 2 and "audit --session" in str(unknown.value)


def test_a_branch_that_called_no_tool_explains_its_last_answer_by_default(db_url, workspace, tmp_path):
    """"Why did it say that?" with nothing named, on a session that only talked: its last turn's answer, not an
    error asking for `--turn`."""
    provider = scripted(tmp_path, [response(text("hello"))], [response(text("the second answer"))])
    with Chronicle(db_url) as app:
        agent = Agent(tools=[], provider=provider)
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        app.run_sync(agent, "second", session=sid, workspace=workspace)
        chain = app.why(sid)
        assert chain == app.why(sid, turn=2)
        assert chain["tool_call"] is None and chain["decided"]["text"] == "the second answer"
        assert chain["asked"]["input"] == "second"
        with pytest.raises(ChronicleError) as named:
            app.why(sid, "peek")
        assert named.value.code == 2 and "no tool call 'peek'" in str(named.value)
    shown = cli("why", sid[:8], db=db_url, env={"COLUMNS": "60"})
    assert shown.returncode == 0, shown.stderr
    assert "Why the answer" in shown.stdout and "the second answer" in shown.stdout
    # The command that shows what the model saw is one line to copy, however narrow the terminal.
    assert f"chronicle history {sid} --at 2 --step 0" in shown.stdout


def test_after_an_undo_turns_are_numbered_as_audit_numbers_them_and_an_undone_call_is_still_explained(db_url, workspace, tmp_path):
    """An undo takes a turn off the branch but not out of the numbering `history --at`, `log` and `audit` use: `why`
    counted branch positions, so after undo + a new turn it called that turn 3 and printed `history --at 3 --step 0`,
    the undone turn's context. `history --at 4 --step 0` itself failed (the step's turn was taken as the branch's
    4th). And the call an auditor asks about after an undo is the one taken back: it was "not on the branch"."""
    turns = [[response(tool_use(f"t{i}", "peek", key=k)), response(text(f"answer {k}"))] for i, k in enumerate("abcd", 1)]
    with Chronicle(db_url) as app:
        agent = Agent(tools=[peek], provider=scripted(tmp_path, *turns))
        sid = app.run_sync(agent, "one", workspace=workspace).session_id
        for prompt in ("two", "three"):
            app.run_sync(agent, prompt, session=sid, workspace=workspace)
        app.undo(sid)
        app.run_sync(agent, "four", session=sid, workspace=workspace)
        audit_turns = {r["tool_call_id"]: r["turn"] for r in app.audit(session=sid) if r["kind"] == "tool_call"}

        last = app.why(sid)
        assert (last["turn"], last["on_branch"], last["asked"]["input"]) == (4, True, "four")
        assert audit_turns[last["tool_call"]["tool_call_id"]] == 4
        assert last["saw"]["history"].endswith("--at 4 --step 0")
        seen = app.history(sid, at=4, step=0)
        assert seen[-1]["content"][0]["text"] == "four" and last["saw"]["messages"] == len(seen) == 9

        undone = app.why(sid, "t3")
        assert (undone["turn"], undone["on_branch"], undone["asked"]["input"]) == (3, False, "three")
        assert undone["tool_call"]["result"]["content"] == "value of c"
        assert audit_turns[undone["tool_call"]["tool_call_id"]] == 3
        assert app.history(sid, at=3, step=0)[-1]["content"][0]["text"] == "three"
        answer = app.why(sid, turn=3)
        assert (answer["on_branch"], answer["decided"]["text"]) == (False, "answer c")
        assert app.why(sid, "t1")["on_branch"] is True  # on the branch still: found there first
        app.undo(sid, turns=3)  # the model-based test's find: nothing on the branch, a call still asked about
        assert (app.why(sid, "t1")["turn"], app.why(sid, "t1")["on_branch"]) == (1, False)
        with pytest.raises(ChronicleError) as nothing_named:
            app.why(sid)
        assert nothing_named.value.code == 1 and "every turn" in str(nothing_named.value)
    shown = cli("why", sid[:8], "t3", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert "turn 3" in shown.stdout and "undone since" in shown.stdout


def test_the_branch_is_read_from_its_end_in_pieces_and_an_early_call_is_still_found(db_url, workspace, tmp_path, monkeypatch):
    from chronicle.runtime.app import why as why_module

    monkeypatch.setattr(why_module, "SCAN", 2)  # three turns: the first is in the second piece read
    provider = scripted(tmp_path, [response(tool_use("t1", "peek", key="a")), response(text("a"))],
                        [response(text("b"))], [response(text("c"))])
    with Chronicle(db_url) as app:
        agent = Agent(tools=[peek], provider=provider)
        sid = app.run_sync(agent, "one", workspace=workspace).session_id
        for prompt in ("two", "three"):
            app.run_sync(agent, prompt, session=sid, workspace=workspace)
        for chain in (app.why(sid), app.why(sid, "t1"), app.why(sid, "peek")):
            assert (chain["turn"], chain["step"], chain["tool_call"]["tool_use_id"]) == (1, 0, "t1")
        assert app.why(sid, turn=2)["decided"]["text"] == "b"


def test_who_approved_or_denied_a_call_is_part_of_its_chain(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [response(tool_use("t1", "launch", target="moon")), response(text("launched"))],
                        [response(tool_use("t2", "launch", target="sun")), response(text("not launched"))])
    with Chronicle(db_url) as app:
        agent = Agent(tools=[launch], provider=provider)
        sid = app.run_sync(agent, "go", workspace=workspace).session_id
        app.approve(sid, actor="alice@desk")
        app.resume(sid)
        app.run_sync(agent, "again", session=sid, workspace=workspace)
        app.deny(sid, reason="too hot", actor="bob@desk")
        app.resume(sid)
        approved = app.why(sid, "t1")["tool_call"]
        assert [c["kind"] for c in approved["checks"]] == ["approval_requested", "approved"]
        assert approved["checks"][1]["actor"] == "alice@desk" and approved["result"]["content"] == "launched moon"
        denied = app.why(sid, "t2")["tool_call"]
        assert [c["kind"] for c in denied["checks"]] == ["approval_requested", "denied"]
        assert (denied["checks"][1]["actor"], denied["checks"][1]["reason"], denied["status"]) == ("bob@desk", "too hot", "denied")
    shown = cli("why", sid, "t2", db=db_url, env={"COLUMNS": "200"}).stdout
    assert [line.split(None, 1)[1] for line in shown.splitlines() if line.startswith("Did")] == ["denied: too hot"]


def hide_secret(text: str, where: str) -> str | None:
    return text.replace("s3cret", "[hidden]") if "s3cret" in text else None


@tool(read_only=True)
async def vault(key: str) -> str:
    """Read a value from the vault."""
    return f"{key} is s3cret"


def test_guardrails_that_changed_what_the_model_read_are_part_of_the_chain(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, response(tool_use("t1", "vault", key="door")), response(tool_use("t2", "peek", key="x")),
                        response(text("done")))
    agent = Agent(tools=[vault, peek], provider=provider,
                  guardrails=[Guardrail("hide", hide_secret, on=["tool_result", "inbound"])])
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "open s3cret door", workspace=workspace).session_id
        first = app.why(sid, "t1")
        # The input was changed before the model saw it; the call's result was changed before the model read it.
        assert [(m["kind"], m["name"], m["action"], m["where"]) for m in first["saw"]["shaped_by"]] == \
            [("guardrail", "hide", "modified", "inbound")]
        assert first["saw"]["last"]["content"][0]["text"] == "open [hidden] door"
        [check] = first["tool_call"]["checks"]
        assert (check["kind"], check["name"], check["action"], check["where"]) == ("guardrail", "hide", "modified", "tool_result")
        assert first["tool_call"]["result"]["content"] == "door is [hidden]" and first["tool_call"]["effects"] == []
        assert app.why(sid, "t2")["saw"]["last"]["content"][0]["content"] == "door is [hidden]"
        shown = cli("why", sid, "t1", db=db_url).stdout
        assert "guardrail hide modified (inbound)" in shown and "guardrail hide modified its result" in shown


def test_a_call_waiting_for_approval_is_explained_before_anyone_answers_it(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, response(text("Launching."), tool_use("t1", "launch", target="moon")), response(text("done")))
    with Chronicle(db_url) as app:
        result = app.run_sync(Agent(tools=[launch], provider=provider), "go to the moon", workspace=workspace)
        assert result.status == "awaiting_approval"
        chain = app.why(result.session_id)  # the moment a person asks: before approving what it decided
        assert chain["saw"]["last"]["content"][0]["text"] == "go to the moon"
        assert chain["decided"]["text"] == "Launching." and chain["tool_call"]["status"] == "awaiting_approval"
        assert [c["kind"] for c in chain["tool_call"]["checks"]] == ["approval_requested"]
        assert chain["then"] == {"turn_status": "awaiting_approval"}
        assert app.history(result.session_id, at=1, step=0) == [{"role": "user", "content": [{"type": "text", "text": "go to the moon"}]}]
    shown = cli("why", result.session_id, db=db_url)
    assert shown.returncode == 0 and "the turn is awaiting approval" in shown.stdout, shown.stderr


def test_steering_that_reached_the_model_before_a_decision_is_what_it_was_asked(db_url, workspace, tmp_path):
    STEER_DB[:] = [db_url]
    provider = scripted(tmp_path, response(tool_use("t1", "nudge")), response(tool_use("t2", "peek", key="b")),
                        response(text("read b as steered")))
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[nudge, peek], provider=provider), "read something", workspace=workspace).session_id
        steered = app.why(sid, "t2")["asked"]["steering"]
        assert [s["text"] for s in steered] == ["use key b next"]
        assert steered[0]["position"] in positions_of(app, sid)
        assert app.why(sid, "t1")["asked"]["steering"] == []  # the first decision was made before it


def test_a_sub_agents_decision_names_the_call_that_started_it(db_url, workspace, tmp_path):
    delegate = tool_use("d1", "delegate", tasks=[{"agent": "helper", "task": "peek at k", "context": "k is a key"}])
    provider = scripted(
        tmp_path, response(delegate), response(text("helper done")),
        helper=[response(tool_use("h1", "peek", key="k")), response(tool_use("h2", "task_complete", status="completed", summary="k read"))],
    )
    helper = Agent(name="helper", description="reads values", tools=[peek])
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[peek], agents=[helper], provider=provider), "delegate it", workspace=workspace).session_id
        [task] = app.tasks(sid)
        chain = app.why(task["child_session_id"], "h1")
        assert chain["tool_call"]["name"] == "peek" and chain["asked"]["agent"] == "helper"
        assert "peek at k" in chain["asked"]["input"]
        parent = chain["delegated_by"]
        assert (parent["session_id"], parent["name"], parent["tool_use_id"], parent["agent"]) == (sid, "delegate", "d1", "helper")
        assert parent["instance"] == "helper-peek-k-1"  # seed 004's instance name: which of helper's children
        assert app.why(task["child_session_id"])["tool_call"]["name"] == "task_complete"


def test_an_inherited_decision_is_explained_from_a_fork(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [response(tool_use("t1", "peek", key="a")), response(text("a"))], [response(text("b"))])
    with Chronicle(db_url) as app:
        agent = Agent(tools=[peek], provider=provider)
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        app.run_sync(agent, "second", session=sid, workspace=workspace)
        child = app.fork(sid, at=1)
        inherited, original = app.why(child, "t1"), app.why(sid, "t1")
        assert inherited["session_id"] == child
        assert {k: v for k, v in inherited.items() if k not in ("session_id", "saw", "evidence_in")} == \
            {k: v for k, v in original.items() if k not in ("session_id", "saw", "evidence_in")}
        # The evidence is in the parent's log, where the inherited turn was recorded: the fork's lists none of it.
        assert inherited["evidence_in"] == {"session_id": sid, "inherited": True, "present": True}
        assert original["evidence_in"] == {"session_id": sid, "inherited": False, "present": True}
        forks_log = {e["position"] for e in app.log(child)}
        assert not set(inherited["evidence"]) & forks_log and set(inherited["evidence"]) <= set(positions_of(app, sid))
    shown = cli("why", child[:8], "t1", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert f"log {sid[:8]}`" in shown.stdout and f"log {child[:8]}" not in shown.stdout, shown.stdout


def test_the_cli_and_the_server_answer_as_the_library_does(db_url, workspace, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    provider = scripted(tmp_path, response(text("Let me peek."), tool_use("t1", "peek", key="a")), response(text("it is a")))
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[peek], provider=provider), "read a", workspace=workspace).session_id
        chain = app.why(sid)
        with TestClient(app.http_app(run_worker=False)) as client:
            assert client.get(f"/sessions/{sid}/why").json() == chain
            assert client.get(f"/sessions/{sid}/why", params={"call": "t9"}).status_code == 404
    # Named by --db, as the library names its store: `saw.history` names it too (with --db: this process has no
    # CHRONICLE_DB, so a plain `chronicle history` would read another store).
    done = cli("why", sid[:8], "--json", "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == chain and chain["saw"]["history"].startswith("chronicle --db ")
    # The same answer from a shell whose CHRONICLE_DB names the store: a field of the answer is not shaped by the
    # environment of the process asking (the library's caller's is not known), as a message's hint is.
    from_env = cli("why", sid[:8], "--json", db=db_url)
    assert from_env.returncode == 0 and json.loads(from_env.stdout) == chain, from_env.stderr
    shown = cli("why", sid[:8], "t1", db=db_url)
    assert shown.returncode == 0, shown.stderr
    for part in ("Why peek (t1)", "Asked", "read a", "Decided", "Let me peek.", "Checked", "Did", "value of a", "Then", "it is a"):
        assert part in shown.stdout, part
    missing = cli("why", sid[:8], "nope", db=db_url)
    assert missing.returncode == 2 and missing.stderr.startswith("error: no tool call 'nope'")
    # One sentence, then a hint to paste: the session is named in full, where its calls are listed.
    assert "undone turns) (give" not in missing.stderr and f"`chronicle audit --session {sid}` lists every call" in missing.stderr
