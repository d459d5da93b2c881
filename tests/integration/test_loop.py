"""The loop's contract on both backends: every tool_use gets exactly one tool_result, whatever happens."""

from __future__ import annotations

import os

from pydantic import BaseModel

from chronicle.domain.context import build_context
from chronicle.runtime.tools.base import Tool
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def test_unknown_tools_invalid_arguments_and_failures_become_results_the_model_reads(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "teleport", to="mars"), tool_use("b", "read_file", file="x"), tool_use("c", "read_file", path="missing.txt")),
        response(text("I see the errors.")),
    ])
    outcome = h.run("try things")
    assert outcome.status == "completed" and outcome.exit_code == 0
    results = h.results()
    assert [r.tool_use_id for r in results] == ["a", "b", "c"]
    assert results[0].content == "unknown tool: teleport" and results[0].is_error
    assert "invalid arguments for read_file" in results[1].content and "path" in results[1].content
    assert results[2].content == "no such file: missing.txt" and results[2].is_error
    assert h.provider.requests[1].messages[-1].content[0].content == "unknown tool: teleport"


def test_a_tool_name_that_differs_only_in_case_is_repaired_and_runs(db_url, workspace, tmp_path):
    """Seed 002's repair: a model's `Read_File` runs read_file (it was answered "unknown tool: Read_File")."""
    (workspace / "notes.txt").write_text("hello", encoding="utf-8")
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "Read_File", path="notes.txt"), tool_use("b", "READ_FILE_NOW", path="notes.txt")),
        response(text("read it")),
    ])
    assert h.run("read the notes").status == "completed"
    first, second = h.results()
    assert (first.content, first.is_error) == ("hello", False)
    assert second.content == "unknown tool: READ_FILE_NOW" and second.is_error  # only case is repaired


def test_paths_outside_the_workspace_are_refused_and_read_nothing(db_url, workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, workspace / "link.txt")
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "read_file", path="../secret.txt"), tool_use("b", "read_file", path=str(secret)),
                 tool_use("c", "read_file", path="link.txt"), tool_use("d", "write_file", path="../evil.txt", content="x")),
        response(text("refused")),
    ])
    h.run("escape")
    results = h.results()
    assert all(r.is_error and "top secret" not in r.content for r in results)
    assert "outside the workspace" in results[0].content and "absolute" in results[1].content
    assert "outside the workspace" in results[2].content
    assert not (tmp_path / "evil.txt").exists()


def test_a_response_cut_at_max_tokens_fails_its_tool_calls_without_running_them(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "write_file", path="half.txt", content="trunc"), stop="max_tokens"),
        response(text("I will be briefer.")),
    ])
    assert h.run("write").status == "completed"
    assert not (workspace / "half.txt").exists()
    [result] = h.results()
    assert result.is_error and "max_tokens" in result.content
    call = h.store.tool_calls_of(h.store.head_turns(h.store.session(h.session_id))[0])[0]
    assert call.status == "failed"


def test_a_turn_fails_clearly_at_max_iterations(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use(f"t{i}", "list_dir", path=".")) for i in range(5)], max_iterations=3)
    outcome = h.run("loop forever")
    assert outcome.status == "failed" and "max_iterations" in outcome.reason
    assert len(h.results()) == 3


def test_running_out_of_scripted_responses_fails_the_turn_with_a_clear_error(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("a", "list_dir", path="."))])
    outcome = h.run("more")
    assert outcome.status == "failed"
    assert "ran out of responses" in outcome.reason and "script.json" in outcome.reason
    errors = [e for e in h.events if e.type == "error"]
    assert errors and "ran out of responses" in errors[0].message


class Explodes(Tool):
    name = "explode"
    description = "always raises"
    read_only = True

    class Input(BaseModel):
        pass

    async def run(self, args, ctx):  # type: ignore[no-untyped-def]
        raise RuntimeError("kaboom")


def test_a_tool_that_raises_becomes_an_error_result(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("a", "explode"), tool_use("b", "grep", pattern="(")), response(text("ok"))])
    h.loop.toolbox.tools["explode"] = Explodes()
    assert h.run("explode").status == "completed"
    raised, bad_regex = h.results()
    assert raised.is_error and raised.content == "explode raised RuntimeError: kaboom"
    assert bad_regex.is_error and "invalid regular expression" in bad_regex.content


def test_cancelling_a_turn_kills_the_running_tool_and_answers_every_tool_use(db_url, workspace, tmp_path):
    import asyncio
    import subprocess

    marker = f"sleep 31.{os.getpid()}"
    h = Harness(db_url, workspace, tmp_path, [
        [response(tool_use("a", "bash", command=marker), tool_use("b", "list_dir", path="."))],
        [response(text("fresh start"))],
    ], auto_approve=True)
    from chronicle.runtime.sessions import start_session

    session, _ = start_session(h.store, h.spec, "sleep")
    h.session_id = session.id

    async def cancel_when_running():
        task = asyncio.ensure_future(h.loop.run_next(session.id))
        while not subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout:  # the command runs
            await asyncio.sleep(0.01)
        task.cancel()
        return await task

    outcome = asyncio.run(cancel_when_running())
    assert outcome.status == "cancelled" and outcome.exit_code == 130
    survivors = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert survivors == ""
    results = h.results()
    assert [(r.tool_use_id, r.is_error) for r in results] == [("a", True), ("b", True)]
    assert all(r.content.startswith("cancelled") for r in results)
    ends = {e.tool_use_id: e for e in h.events if e.type == "tool_end"}
    assert {k: (e.status, e.is_error) for k, e in ends.items()} == {"a": ("cancelled", True), "b": ("cancelled", True)}
    assert ends["a"].output.startswith("cancelled")
    assert h.run("again").status == "completed"


def test_large_outputs_are_truncated_with_a_note(db_url, workspace, tmp_path):
    (workspace / "big.txt").write_text("x" * 50_000)
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("a", "read_file", path="big.txt")), response(text("ok"))])
    h.run("read big")
    [result] = h.results()
    assert len(result.content) < 31_000 and "[truncated: 20000 more characters not shown]" in result.content


def test_the_next_turn_sees_the_previous_turns_from_the_event_log(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        [response(tool_use("a", "read_file", path="hello.txt")), response(text("It says hello."))],
        [response(text("You asked about hello.txt."))],
    ])
    h.run("what does hello.txt say?")
    h.run("what did I ask?")
    second = h.provider.requests[-1]
    assert second.turn_number == 2 and second.call_index == 0
    assert [m.role for m in second.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert second.messages[-1].content[0].text == "what did I ask?"
    session = h.store.session(h.session_id)
    assert [m.model_dump() for m in build_context(h.store.head_turns(session))][-1]["content"][0]["text"] == "You asked about hello.txt."


def test_retryable_provider_errors_are_retried_and_each_retry_is_recorded(db_url, workspace, tmp_path):
    overloaded = {"content": [], "stop_reason": "error", "error": {"kind": "overloaded_error", "message": "Overloaded", "retryable": True}}
    h = Harness(db_url, workspace, tmp_path, [[overloaded]])
    outcome = h.run("hi")
    # The scripted provider answers call_index 0 with the same error every time: all attempts are used.
    assert outcome.status == "failed" and "Overloaded" in outcome.reason
    turn = h.store.head_turns(h.store.session(h.session_id))[0]
    assert [r["attempt"] for r in turn.retries] == list(range(1, 8))
    assert [e.status for e in h.events if e.type == "status_change" and e.status == "retry"] == ["retry"] * 7


def test_a_crashed_turn_resumes_without_running_a_non_idempotent_tool_twice(db_url, workspace, tmp_path):
    import asyncio

    from chronicle.domain.ids import tool_call_id

    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("w", "edit_file", path="hello.txt", old="hello", new="bye"), tool_use("r", "read_file", path="hello.txt")),
        response(text("done")),
    ])
    # Simulate a process that died inside edit_file: response recorded, edit_file committed as running.
    from chronicle.runtime.sessions import start_session

    session, _ = start_session(h.store, h.spec, "edit")
    h.session_id = session.id
    turn, _ = h.loop._begin_turn(h.store.session(session.id))
    request_response = h.provider.script.agents["main"][0]
    from chronicle.domain.content import ModelResponse

    first = ModelResponse.model_validate({k: v for k, v in request_response.model_dump().items() if k in ("content", "stop_reason", "usage")})
    from chronicle.runtime.providers.base import ModelRequest

    h.loop._prior_count = 0
    h.loop._record_response(turn, first, ModelRequest(model="scripted"), 1, 1.0)
    edit = h.store.tool_call(tool_call_id(turn.id, 0, "w"))
    edit.start(h.loop.clock.now())
    h.store.save(edit)

    outcome = asyncio.run(h.loop.run_next(session.id))
    assert outcome.status == "completed"
    assert (workspace / "hello.txt").read_text().startswith("hello")  # the edit was never run
    results = h.results()
    assert [r.tool_use_id for r in results] == ["w", "r"]
    assert results[0].is_error and "not idempotent" in results[0].content
    assert not results[1].is_error and results[1].content.startswith("hello")
    turn = h.store.turn(turn.id)
    log_statuses = [type(e).__name__ for e in h.store.events.get(turn.id)]
    assert "Interrupted" in log_statuses and "Resumed" in log_statuses


def test_a_postgresql_schema_named_in_the_url_is_created_on_first_use(pg_database):
    import uuid

    import psycopg

    from chronicle.runtime.store import ChronicleStore

    schema = f"fresh_{uuid.uuid4().hex[:8]}"
    store = ChronicleStore(f"{pg_database}?schema={schema}")
    assert store.session_ids() == []
    store.close()
    with psycopg.connect(pg_database) as conn:
        found = conn.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)).fetchone()
    assert found is not None
