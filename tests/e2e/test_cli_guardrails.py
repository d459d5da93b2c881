"""Guardrails through the real CLI: checks from chronicle.toml on the input, tool results and the final
answer; modify, reject, and a broken check under fail = open and fail = closed, each a recorded event."""

from __future__ import annotations

import hashlib

from tests.helpers import cli, json_lines, response, text, tool_use, write_script

CHECKS = '''
from chronicle.runtime.guardrails import Rejected


def redact(text, where):
    return text.replace("hello world", "[redacted]") if "hello world" in text else None


def shorten_names(text, where):
    return text.replace("Alexandra", "Alex") if "Alexandra" in text else None


def no_passwords(text, where):
    if "password" in text.lower():
        raise Rejected("mentions a password")


def broken(text, where):
    raise RuntimeError("the check has a bug")
'''

CONFIG = '''
[guardrails.redact]
check = "checks:redact"
on = ["tool_result"]

[guardrails.no_passwords]
check = "checks:no_passwords"
on = ["inbound", "final"]

[guardrails.names]
check = "checks:shorten_names"
on = ["inbound", "final"]

[guardrails.flaky]
check = "checks:broken"
on = ["tool_result"]
fail = "{fail}"
'''


def setup(workspace, fail: str = "open") -> None:
    (workspace / "checks.py").write_text(CHECKS, encoding="utf-8")
    (workspace / "chronicle.toml").write_text(CONFIG.replace("{fail}", fail), encoding="utf-8")


def run(workspace, tmp_path, db_url, prompt: str, main: list) -> tuple[int, list[dict]]:
    script = write_script(tmp_path / "s.json", main)
    result = cli("run", prompt, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    return result.returncode, json_lines(result.stdout)


def test_a_tool_result_is_redacted_before_it_is_recorded_and_a_failing_open_check_is_noted(db_url, workspace, tmp_path):
    setup(workspace, fail="open")
    code, events = run(workspace, tmp_path, db_url, "read it",
                       [response(tool_use("t1", "read_file", path="hello.txt")), response(text("It is redacted."))])
    assert code == 0
    end = next(e for e in events if e["type"] == "tool_end")
    assert "[redacted]" in end["output"] and "hello world" not in end["output"] and end["is_error"] is False
    audit = json_lines(cli("audit", "--session", events[0]["session_id"], "--tool", "read_file", "--json", db=db_url).stdout)
    effects = audit[-1]["detail"]["effects"]
    redacted = next(e for e in effects if e.get("guardrail") == "redact")
    assert redacted["action"] == "modified" and redacted["where"] == "tool_result"
    assert redacted["after_sha256"] == hashlib.sha256(end["output"].encode()).hexdigest() != redacted["before_sha256"]
    assert redacted["before_chars"] - redacted["after_chars"] == len("hello world") - len("[redacted]")
    assert any(e.get("guardrail") == "flaky" and e.get("fail") == "open" and e["action"] == "error" for e in effects)
    assert "hello world" not in cli("log", events[0]["session_id"], "--json", db=db_url).stdout


def test_a_failing_closed_check_turns_the_tool_result_into_the_calls_failure(db_url, workspace, tmp_path):
    setup(workspace, fail="closed")
    code, events = run(workspace, tmp_path, db_url, "read it",
                       [response(tool_use("t1", "read_file", path="hello.txt")), response(text("Could not read."))])
    assert code == 0
    end = next(e for e in events if e["type"] == "tool_end")
    assert end["is_error"] is True
    assert end["output"] == "guardrail flaky rejected the result of read_file: the check raised RuntimeError: the check has a bug"


def test_a_rejected_final_answer_fails_the_turn_with_the_checks_message(db_url, workspace, tmp_path):
    setup(workspace)
    code, events = run(workspace, tmp_path, db_url, "what is it?", [response(text("The password is hunter2."))])
    assert code == 1
    end = next(e for e in events if e["type"] == "turn_end")
    assert end["status"] == "failed"
    assert end["reason"] == "guardrail no_passwords rejected the final answer: mentions a password"
    audit = json_lines(cli("audit", "--session", events[0]["session_id"], "--errors", "--json", db=db_url).stdout)
    assert audit[-1]["kind"] == "failure" and audit[-1]["detail"]["error"] == {"guardrail": "guardrail:no_passwords"}


def test_a_rejected_final_answer_stays_recorded_but_is_never_sent_to_the_model_again(db_url, workspace, tmp_path):
    setup(workspace)
    script = write_script(tmp_path / "s.json", [[response(text("The password is hunter2."))], [response(text("Fine."))]])
    first = cli("run", "what is it?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 1, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    second = cli("run", "and now?", "--session", sid, "--provider", f"scripted:{script}", "--json", db=db_url)
    assert second.returncode == 0, second.stderr
    withheld = [{"type": "text", "text": "[answer withheld: guardrail:no_passwords rejected it]"}]
    for flags in (("--at", "1"), ("--at", "2", "--step", "0"), ()):  # as turn 1 ended; what turn 2 was sent; what comes next
        sent = json_lines(cli("history", sid, *flags, "--json", db=db_url).stdout)
        assert sent[1] == {"role": "assistant", "content": withheld} and "hunter2" not in str(sent), flags
    assert "hunter2" in cli("log", sid, "--json", db=db_url).stdout, "the model's response stays recorded"
    assert cli("projections", "rebuild", db=db_url).returncode == 0
    assert json_lines(cli("history", sid, "--at", "2", "--step", "0", "--json", db=db_url).stdout)[1]["content"] == withheld


def test_a_rejected_input_stops_the_turn_before_the_model_is_asked(sqlite_url, workspace, tmp_path):
    setup(workspace)
    code, events = run(workspace, tmp_path, sqlite_url, "tell me the admin password", [response(text("never asked"))])
    assert code == 4
    end = next(e for e in events if e["type"] == "turn_end")
    assert end["status"] == "stopped" and "rejected the input: mentions a password" in end["reason"]
    assert not [e for e in events if e["type"] == "usage"], "no model call was made"


def test_a_check_that_does_not_load_is_one_line_and_exit_2(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[guardrails.x]\ncheck = "nowhere:thing"\n', encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    result = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert result.returncode == 2
    assert "guardrails.x: cannot load check 'nowhere:thing': No module named 'nowhere'" in result.stderr


def test_an_input_a_check_changes_is_what_the_model_reads_and_the_change_is_an_audited_event(db_url, workspace, tmp_path):
    setup(workspace)
    code, events = run(workspace, tmp_path, db_url, "say hi to Alexandra", [response(text("Hi Alex!"))])
    assert code == 0
    sid = events[0]["session_id"]
    log = cli("log", sid, "--json", db=db_url).stdout
    assert "GuardrailApplied" in log
    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    row = next(r for r in audit if r["kind"] == "guardrail")
    assert (row["name"], row["status"], row["detail"]["where"], row["detail"]["text"]) == ("names", "modified", "inbound", "say hi to Alex")
    assert row["detail"]["before_sha256"] == hashlib.sha256(b"say hi to Alexandra").hexdigest()
    assert row["detail"]["after_sha256"] == hashlib.sha256(b"say hi to Alex").hexdigest()
    # the model was asked with the changed input: the recorded request fingerprint matches a replay of it
    replay = json_lines(cli("replay", sid, "--json", db=db_url).stdout)
    assert replay[-1]["identical"] is True


def test_a_final_answer_a_check_changes_is_what_the_turn_delivers_and_what_the_next_turn_reads(db_url, workspace, tmp_path):
    setup(workspace)
    code, events = run(workspace, tmp_path, db_url, "who is there?", [response(text("Alexandra is here."))])
    assert code == 0
    end = next(e for e in events if e["type"] == "turn_end")
    assert end["text"] == "Alex is here."
    sid = events[0]["session_id"]
    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    row = next(r for r in audit if r["kind"] == "guardrail")
    assert (row["name"], row["detail"]["where"], row["detail"]["text"]) == ("names", "final", "Alex is here.")
    model_call = next(r for r in audit if r["kind"] == "model_call")
    assert model_call["detail"]["text"] == "Alexandra is here.", "the model's response stays recorded verbatim"
    turn_end = next(r for r in audit if r["kind"] == "turn_end")
    assert turn_end["detail"]["final_text"] == "Alex is here."


def test_the_terminal_shows_the_delivered_answer_when_a_check_changed_it_after_it_streamed(sqlite_url, workspace, tmp_path):
    setup(workspace)
    script = write_script(tmp_path / "s.json", [response(text("Alexandra is here."))])
    result = cli("run", "who?", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert result.returncode == 0
    streamed, _, delivered = result.stdout.partition("a guardrail changed the answer; delivered:")
    assert "Alexandra is here." in streamed and delivered.strip().startswith("Alex is here.")


def test_an_answer_only_the_secret_scan_changed_is_said_to_be_redacted_not_guardrailed(sqlite_url, workspace, tmp_path):
    """No guardrail is configured: the scan's markers are what changed the answer after it streamed, and the
    terminal says so, with how many values it cut."""
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    script = write_script(tmp_path / "s.json", [response(text(f"Use {token} and password={'Hunter22' + 'Secret!'} there."))])
    result = cli("run", "how do I log in?", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert result.returncode == 0, result.stderr
    assert "guardrail" not in result.stdout
    _, said, delivered = result.stdout.partition("the secret scan redacted 2 values in the answer; delivered:")
    assert said, result.stdout
    assert delivered.strip().startswith("Use [REDACTED:github-token] and password=[REDACTED:assigned-secret] there.")
