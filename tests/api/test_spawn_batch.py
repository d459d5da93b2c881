"""spawn_batch (seed 001): a tool runs tool-exec subtasks concurrently and gets their results in input order,
each recorded on the calling tool call; a failing or refused subtask is its own slot's error. Both backends."""

from __future__ import annotations

import asyncio
import hashlib
import json

from chronicle import Agent, Chronicle, ToolContext, tool
from tests.helpers import response, text, tool_use


@tool(read_only=True)
async def slow_echo(word: str, delay_s: float) -> str:
    """Echo a word after a delay.

    Args:
        word: What to echo.
        delay_s: How long to wait first.
    """
    await asyncio.sleep(delay_s)
    return word


@tool(read_only=True)
async def fan_out(words: list[str], ctx: ToolContext) -> str:
    """Echo several words at once.

    Args:
        words: The words.
    """
    # the first waits longest: finishing order is the reverse of the input order
    tasks = [("slow_echo", {"word": w, "delay_s": 0.05 * (len(words) - i)}) for i, w in enumerate(words)]
    tasks += [("write_file", {"path": "x.txt", "content": "no"}), ("slow_echo", {"word": 3})]
    outputs = await ctx.spawn_batch(tasks)
    return json.dumps([[o.content, o.is_error] for o in outputs])


def test_a_batch_returns_results_in_input_order_and_records_each_subtask(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[
        response(tool_use("t1", "fan_out", words=["one", "two", "three"])), response(text("done")),
    ]]}}), encoding="utf-8")
    agent = Agent(tools=[fan_out, slow_echo, "write_file"], provider=f"scripted:{script}")
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "echo", workspace=workspace)
        assert result.status == "completed"
        [row] = app.audit(session=result.session_id, tool="fan_out")
        results = json.loads(row["detail"]["output"])
        assert results[:3] == [["one", False], ["two", False], ["three", False]]
        assert results[3][1] is True and "only read-only or idempotent tools" in results[3][0]
        assert results[4][1] is True and "invalid arguments for slow_echo" in results[4][0]
        subtasks = [e for e in row["detail"]["effects"] if "subtask" in e]
        assert [(s["subtask"], s["tool"], s["is_error"]) for s in subtasks] == [
            (0, "slow_echo", False), (1, "slow_echo", False), (2, "slow_echo", False), (3, "write_file", True), (4, "slow_echo", True)]
        assert subtasks[0]["input"]["word"] == "one" and subtasks[0]["output_chars"] == 3
    assert not (workspace / "x.txt").exists()


@tool(read_only=True)
async def fan_out_then_fail(ctx: ToolContext) -> str:
    """Run a batch, then fail."""
    await ctx.spawn_batch([("slow_echo", {"word": "kept", "delay_s": 0})])
    raise ValueError("the caller broke after its batch")


@tool(read_only=True, timeout_s=1)
async def fan_out_too_long(ctx: ToolContext) -> str:
    """Run a batch whose second subtask outlives the calling tool's timeout."""
    await ctx.spawn_batch([("slow_echo", {"word": "quick", "delay_s": 0}), ("slow_echo", {"word": "late", "delay_s": 60})])
    return "never"


def test_a_calling_tool_that_fails_or_times_out_keeps_the_record_of_its_subtasks(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[
        response(tool_use("t1", "fan_out_then_fail"), tool_use("t2", "fan_out_too_long")), response(text("done")),
    ]]}}), encoding="utf-8")
    agent = Agent(tools=[fan_out_then_fail, fan_out_too_long, slow_echo], provider=f"scripted:{script}")
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "echo", workspace=workspace)
        assert result.status == "completed"
        for name, expected in [("fan_out_then_fail", [(0, "kept", False, None)]),
                               ("fan_out_too_long", [(0, "quick", False, None), (1, "late", True, True)])]:
            effects_row, end_row = app.audit(session=result.session_id, tool=name)
            assert (effects_row["kind"], end_row["kind"], end_row["status"]) == ("tool_effects", "tool_call", "failed")
            assert [(m["subtask"], m["input"]["word"], m["is_error"], m.get("unfinished")) for m in effects_row["detail"]["effects"]] == expected
        failed = [e for e in app.log(result.session_id) if e["aggregate"] == "tool_call" and e["event"] == "EffectsRecorded"]
        assert len(failed) == 2, "each failed call's subtasks are an event in the log"


#: What read_both reads; a test changes it to stand for a change of the tool's code between a run and its replay.
BOTH = ["hello.txt", "other.txt"]


@tool(read_only=True)
async def read_both(ctx: ToolContext) -> str:
    """Read two files at once."""
    outputs = await ctx.spawn_batch([("read_file", {"path": path}) for path in BOTH])
    return " | ".join(o.content for o in outputs)


def test_replay_compares_each_subtask_with_its_own_record_and_names_the_one_that_changed(db_url, workspace, tmp_path, monkeypatch):
    (workspace / "other.txt").write_text("other\n", encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(tool_use("t1", "read_both")), response(text("done"))]]}}), encoding="utf-8")
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[read_both, "read_file"], provider=f"scripted:{script}"), "read", workspace=workspace).session_id
        same = app.replay(sid)
        assert same["identical"] is True, same["verdict"]
        assert (same["rechecked"], same["reused"]) == (3, 0)  # the calling tool and its two subtasks

        (workspace / "other.txt").write_text("changed\n", encoding="utf-8")
        changed = app.replay(sid)
        assert changed["divergence"] == {"turn": 1, "step": 0, "kind": "tool result", "detail":
                                         "subtask 1 of read_both (t1): read_file returned 'changed'; the recording has 5 character(s) "
                                         f"with SHA-256 {hashlib.sha256(b'other').hexdigest()[:12]}…"}

        monkeypatch.setattr(f"{__name__}.BOTH", ["hello.txt", "hello.txt"])  # the tool now asks for another subtask
        asks = app.replay(sid)
        assert asks["divergence"]["detail"] == ("subtask 1 of read_both (t1) asks read_file {\"path\": \"hello.txt\"}, "
                                                "recorded read_file {\"path\": \"other.txt\"}")


STAMPED: list[str] = []


@tool(idempotent=True)
def stamp(word: str) -> str:
    """Note a word down (idempotent: noting it twice changes nothing).

    Args:
        word: The word.
    """
    STAMPED.append(word)
    return f"stamped {word}"


@tool(read_only=True)
async def read_and_stamp(ctx: ToolContext) -> str:
    """Read hello.txt and note a word down at once."""
    outputs = await ctx.spawn_batch([("read_file", {"path": "hello.txt"}), ("stamp", {"word": "seen"})])
    return " | ".join(o.content for o in outputs)


def test_replay_answers_a_batch_that_ran_a_tool_which_is_not_read_only_from_the_recording(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(tool_use("t1", "read_and_stamp")), response(text("done"))]]}}),
                      encoding="utf-8")
    STAMPED.clear()
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[read_and_stamp, stamp, "read_file"], provider=f"scripted:{script}"), "go",
                           workspace=workspace).session_id
        assert STAMPED == ["seen"]
        same = app.replay(sid)
        assert same["identical"] is True, same["verdict"]
        assert (same["rechecked"], same["reused"]) == (0, 1)
    assert STAMPED == ["seen"], "replay ran a subtask that is not read-only"
