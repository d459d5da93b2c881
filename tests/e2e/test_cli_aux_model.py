"""The auxiliary model through the real CLI: titles and compaction summaries ask it, the session records it,
`cost --by model` prices its calls at its own rates; unset, the main model answers as before (both backends)."""

from __future__ import annotations

import json

import pytest

from chronicle.runtime.pricing import price
from tests.helpers import cli, json_lines, response, text
from tests.sse_server import reply, sse  # noqa: F401

MAIN, AUX = "claude-sonnet-4-5", "claude-haiku-4-5"


def script(tmp_path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "agents": {"main": [[response(text("One."), usage=(1000, 100))], [response(text("Two."), usage=(1000, 100))]]},
        "title": [{"content": [text("A title")], "usage": {"input_tokens": 200, "output_tokens": 10}}],
        "summary": [{"content": [text("They said hello.")], "usage": {"input_tokens": 3000, "output_tokens": 300}}],
    }), encoding="utf-8")
    return f"scripted:{path}"


def two_turns_then_compact(db_url, workspace, tmp_path, env=None) -> tuple[str, list[dict]]:
    provider = script(tmp_path)
    first = cli("run", "hello", "--provider", provider, "--model", MAIN, "--workspace", str(workspace), "--json", db=db_url, env=env)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    assert cli("run", "again", "--session", sid, "--json", db=db_url, env=env).returncode == 0
    compacted = cli("compact", sid, "--keep", "1", "--json", db=db_url, env=env)
    assert compacted.returncode == 0 and json_lines(compacted.stdout)[0]["ok"] is True, compacted.stdout + compacted.stderr
    return sid, json_lines(cli("log", sid, "--json", db=db_url).stdout)


def event(log: list[dict], name: str) -> dict:
    return next(e["data"] for e in log if e["event"] == name)


def test_titles_and_summaries_ask_the_auxiliary_model_which_the_session_records_and_cost_prices(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(f'[models]\nauxiliary = "{AUX}"\n', encoding="utf-8")
    sid, log = two_turns_then_compact(db_url, workspace, tmp_path)
    assert event(log, "Started")["spec"]["aux_model"] == AUX and event(log, "Started")["spec"]["model"] == MAIN
    assert event(log, "TitleSet")["model"] == AUX and event(log, "Compacted")["model"] == AUX
    assert {e["data"]["response"]["model"] for e in log if e["event"] == "ModelResponded"} == {MAIN}

    rows = {r["model"]: r for r in json_lines(cli("cost", sid, "--by", "model", "--json", db=db_url).stdout) if r["scope"] == "self"}
    assert set(rows) == {MAIN, AUX}
    aux, main = rows[AUX], rows[MAIN]
    assert (aux["calls"], aux["input_tokens"], aux["output_tokens"]) == (2, 3200, 310)
    expected = price(AUX, {"input_tokens": 200, "output_tokens": 10}) + price(AUX, {"input_tokens": 3000, "output_tokens": 300})
    assert aux["usd"] == pytest.approx(expected) and aux["usd"] < price(MAIN, {"input_tokens": 3200, "output_tokens": 310})
    assert (main["calls"], main["usd"]) == (2, pytest.approx(2 * price(MAIN, {"input_tokens": 1000, "output_tokens": 100})))


def test_without_an_auxiliary_model_the_main_model_answers_and_nothing_more_is_recorded(sqlite_url, workspace, tmp_path):
    sid, log = two_turns_then_compact(sqlite_url, workspace, tmp_path)
    assert "aux_model" not in event(log, "Started")["spec"]
    assert event(log, "TitleSet")["model"] == MAIN and event(log, "Compacted")["model"] == MAIN
    rows = [r for r in json_lines(cli("cost", sid, "--by", "model", "--json", db=sqlite_url).stdout) if r["scope"] == "self"]
    assert [(r["model"], r["calls"]) for r in rows] == [(MAIN, 4)]


def test_chronicle_aux_model_wins_over_the_file_and_a_blank_name_is_refused(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[models]\nauxiliary = "claude-3-5-haiku-latest"\n', encoding="utf-8")
    provider = script(tmp_path)
    run = cli("run", "hi", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url,
              env={"CHRONICLE_AUX_MODEL": AUX})
    assert run.returncode == 0, run.stderr
    log = json_lines(cli("log", json_lines(run.stdout)[0]["session_id"], "--json", db=sqlite_url).stdout)
    assert event(log, "Started")["spec"]["aux_model"] == AUX and event(log, "TitleSet")["model"] == AUX
    (workspace / "chronicle.toml").write_text('[models]\nauxiliary = " "\n', encoding="utf-8")
    bad = cli("run", "hi", "--provider", provider, "--workspace", str(workspace), db=sqlite_url)
    assert bad.returncode == 2 and "[models] auxiliary: expected a model name" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_heartbeat_session_records_the_auxiliary_model_as_its_model(sqlite_url, workspace, tmp_path):
    """The seed's cheap_llm runs the heartbeat; other routines keep the main agent's model."""
    (workspace / "chronicle.toml").write_text(
        f'[models]\nauxiliary = "{AUX}"\n\n[agents.main]\nmodel = "{MAIN}"\n\n[routines.heartbeat]\nheartbeat = true\n', encoding="utf-8")
    (workspace / "HEARTBEAT.md").write_text("- is hello.txt still there?\n", encoding="utf-8")
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"agents": {"routine-heartbeat": [[response(text("HEARTBEAT_OK"))]]}}), encoding="utf-8")
    fired = cli("routines", "run", "heartbeat", "--provider", f"scripted:{path}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert fired.returncode == 0, fired.stderr
    log = json_lines(cli("log", json_lines(fired.stdout)[0]["session_id"], "--json", db=sqlite_url).stdout)
    assert event(log, "Started")["spec"]["model"] == AUX
    assert {e["data"]["response"]["model"] for e in log if e["event"] == "ModelResponded"} == {AUX}


def test_on_the_wire_the_title_request_names_the_auxiliary_model_and_the_turn_the_main_one(sqlite_url, workspace, sse):
    (workspace / "chronicle.toml").write_text(f'[models]\nauxiliary = "{AUX}"\n', encoding="utf-8")
    sse.script(reply([{"type": "text", "text": "Hello."}], usage={"input_tokens": 10, "output_tokens": 2}, model=MAIN))
    env = {"ANTHROPIC_BASE_URL": sse.url, "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-987654"}
    run = cli("run", "hi", "--provider", "anthropic", "--model", MAIN, "--workspace", str(workspace), "--json", db=sqlite_url, env=env)
    assert run.returncode == 0, run.stderr
    assert sse.wait_for(lambda: bool(sse.title_requests))
    assert [r.body["model"] for r in sse.requests] == [MAIN]
    assert [r.body["model"] for r in sse.title_requests] == [AUX]
