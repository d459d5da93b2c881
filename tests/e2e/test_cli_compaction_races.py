"""Compaction takes a model call's time between reading the branch and recording what it replaced;
other processes act on the session meanwhile, and a compaction may be killed inside its call. Each
case ends as a recorded fact or as nothing at all, never as an internal error or a wedged session.

The summary call is placed with the scripted provider's files: `started_file` says the compaction
is inside its call, `until_file` holds the answer until the test has acted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, json_lines, response, text
from tests.recovery import wait_for


def _three_turns(db: str, workspace, tmp_path) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "agents": {"main": [[response(text(word))] for word in ("one", "two", "three", "four")]},
        "summary": [{"content": [text("SUMMARY")], "started_file": str(tmp_path / "summarising"),
                     "until_file": str(tmp_path / "answer")}],
    }))
    first = cli("run", "a", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    sid = json_lines(first.stdout)[0]["session_id"]
    for prompt in ("b", "c"):
        assert cli("run", prompt, "--session", sid, "--json", db=db).returncode == 0
    return sid, {"script": script}


def chronicle_env(db: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db}


def _compact(db: str, sid: str) -> subprocess.Popen[str]:
    return processes.start([sys.executable, "-m", "chronicle.runtime.cli", "compact", sid, "--keep", "1", "--json"],
                           env=chronicle_env(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_compaction_whose_turns_are_undone_while_it_summarises_records_its_failure(db_url, workspace, tmp_path):
    sid, _ = _three_turns(db_url, workspace, tmp_path)
    compacting = _compact(db_url, sid)
    try:
        wait_for(lambda: (tmp_path / "summarising").exists() or compacting.poll() is not None, timeout=60)
        undone = cli("undo", sid, "--turns", "2", db=db_url)
        assert undone.returncode == 0, undone.stderr
        (tmp_path / "answer").touch()
        out, err = compacting.communicate(timeout=60)
    finally:
        processes.stop(compacting)
    assert compacting.returncode == 1 and "internal error" not in err, err
    row = json.loads(out)
    assert row["ok"] is False and "changed while" in row["reason"], row
    entries = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    failed = [e for e in entries if e["event"] == "CompactionFailed"]
    assert len(failed) == 1 and "changed while" in failed[0]["data"]["reason"]
    assert failed[0]["data"]["usage"] is not None  # the paid call is on the record
    assert not [e for e in entries if e["event"] == "Compacted"]
    history = json_lines(cli("history", sid, "--json", db=db_url).stdout)
    assert history[0]["content"][0]["text"] == "a" and len(history) == 2  # turn 1 whole, no summary in its place
    assert cli("verify", "--all", db=db_url).returncode == 0
    again = cli("run", "d", "--session", sid, "--json", db=db_url)
    assert again.returncode == 0, again.stderr


def test_a_compaction_killed_inside_its_summary_call_leaves_the_session_usable_and_a_new_one_compacts(db_url, workspace, tmp_path):
    sid, _ = _three_turns(db_url, workspace, tmp_path)
    store = ChronicleStore(db_url)
    before = store.max_position()
    compacting = _compact(db_url, sid)
    wait_for(lambda: (tmp_path / "summarising").exists() or compacting.poll() is not None, timeout=60)
    compacting.send_signal(signal.SIGKILL)
    compacting.wait(timeout=10)
    assert compacting.returncode == -signal.SIGKILL
    assert store.max_position() == before, "a killed compaction recorded half of itself"
    assert store.session(store.resolve_session_id(sid)).status == "idle"
    (tmp_path / "answer").touch()
    (tmp_path / "summarising").unlink()
    done = cli("compact", sid, "--keep", "1", "--json", db=db_url)
    assert done.returncode == 0 and json.loads(done.stdout)["turns_compacted"] == 2, done.stdout + done.stderr
    assert cli("verify", "--all", db=db_url).returncode == 0
    store.close()
