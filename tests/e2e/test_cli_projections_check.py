"""`chronicle projections check`: the read models compared with the log, as an auditor runs it from outside."""

from __future__ import annotations

import json

from tests.helpers import cli, json_lines, text, tool_use
from tests.tamper import Tamper


def _session(tmp_path, workspace, db_url) -> str:  # type: ignore[no-untyped-def]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        {"content": [tool_use("tu_1", "list_dir", path=".")], "stop_reason": "tool_use"},
        {"content": [text("Two files here.")], "stop_reason": "end_turn"},
    ]}}), encoding="utf-8")
    done = cli("run", "what is here?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[0]["session_id"]


def test_untouched_read_models_agree_and_an_edited_row_is_named_with_what_the_log_gives(db_url, workspace, tmp_path):
    """`verify` proves the log, but `audit` and `history` read the read models: an UPDATE on them changed what an
    auditor was shown and no command noticed. The check builds them again from the log and names the rows that
    differ; `projections rebuild` then puts them right."""
    sid = _session(tmp_path, workspace, db_url)
    agreed = cli("projections", "check", "--json", db=db_url)
    assert agreed.returncode == 0, agreed.stderr
    rows = json_lines(agreed.stdout)
    assert [r["projection"] for r in rows] == ["history", "summaries", "cost", "audit"]
    assert all(r["agrees"] and r["tables"] == [] and r["position"] > 0 for r in rows), rows

    tamper = Tamper(db_url)
    tamper.run(f"UPDATE {tamper.table('proj_history_turns')} SET final_text = %s WHERE session_id = %s",
               ("Nothing here.", sid))
    tamper.run(f"DELETE FROM {tamper.table('proj_audit')} WHERE kind = %s", ("tool_call",))
    found = cli("projections", "check", "--json", db=db_url)
    assert found.returncode == 1
    assert found.stderr.strip().splitlines()[-1] == (
        "error: history, audit differ from the log, which `verify` proves; `chronicle projections rebuild` builds them again from it")
    by_name = {r["projection"]: r for r in json_lines(found.stdout)}
    assert by_name["summaries"]["agrees"] and by_name["cost"]["agrees"]
    [turns] = by_name["history"]["tables"]
    assert turns["table"] == "proj_history_turns" and (turns["missing"], turns["unexpected"]) == (1, 1)
    assert "Two files here." in turns["examples_missing"][0] and "Nothing here." in turns["examples_unexpected"][0]
    [audit] = by_name["audit"]["tables"]
    assert audit["table"] == "proj_audit" and audit["missing"] >= 1 and audit["unexpected"] == 0
    assert {row[6] for row in audit["examples_missing"]} == {"tool_call"}

    told = cli("projections", "check", "history", db=db_url)  # one read model, in words
    assert told.returncode == 1 and "history: proj_history_turns differs from the log" in told.stdout
    assert "there:" in told.stdout and "Nothing here." in told.stdout and "Two files here." in told.stdout
    assert "`chronicle projections rebuild history`" in told.stderr

    assert cli("projections", "rebuild", db=db_url).returncode == 0
    again = cli("projections", "check", db=db_url)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("agrees with the log") == 4


def test_a_projection_name_it_does_not_know_is_a_usage_error(sqlite_url, workspace, tmp_path):
    _session(tmp_path, workspace, sqlite_url)
    done = cli("projections", "check", "costs", db=sqlite_url)
    assert done.returncode == 2 and "no projection named 'costs'" in done.stderr
