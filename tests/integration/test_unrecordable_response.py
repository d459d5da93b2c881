"""A response the log cannot hold as a step is a recorded, priced failure — never a wedge."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def test_duplicate_tool_use_ids_fail_the_turn_once_and_are_priced(db_url, workspace, tmp_path):
    script = write_script(
        tmp_path / "s.json",
        [
            response(tool_use("tu_same", "read_file", path="hello.txt"), tool_use("tu_same", "list_dir", path="."),
                     usage=(123, 45)),
            response(text("never reached")),
        ],
    )
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 1, run.stderr
    events = json_lines(run.stdout)
    sid = events[0]["session_id"]
    assert events[-1]["type"] == "agent_end" and events[-1]["status"] == "failed"
    assert "same tool_use id" in run.stderr + run.stdout

    log = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    assert not [e for e in log if e["aggregate"] == "tool_call"], "no tool call may run from an unrecordable response"
    ended = [e for e in log if e["aggregate"] == "turn" and e["event"] == "Failed"]
    assert len(ended) == 1

    cost = json_lines(cli("cost", sid, "--json", db=db_url).stdout)
    own = next(row for row in cost if row["scope"] == "self")
    assert own["input_tokens"] == 123 and own["output_tokens"] == 45 and own["calls"] == 1

    again = cli("resume", "--all", "--json", db=db_url)
    assert again.returncode == 0, again.stderr
    assert len([e for e in json_lines(cli("log", sid, "--json", db=db_url).stdout) if e["event"] == "ModelResponded"]) == 1
