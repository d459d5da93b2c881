"""A worker's failure to advance a session is an event on that session, not only a log line:
`log` and `audit` show why the session stands still, and the worker goes on with the others."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from uuid import UUID

from chronicle.runtime.app.worker import Overrides, Worker, WorkerOptions
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, write_script


def submit(db: str, script, workspace, prompt: str, *extra: str) -> str:
    done = cli("submit", prompt, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", *extra, db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["session_id"]


def test_a_session_the_worker_cannot_continue_records_why_and_the_others_run(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    gone = tmp_path / "gone"
    shutil.copytree(workspace, gone)
    broken = submit(db_url, script, gone, "a")
    good = submit(db_url, script, workspace, "b")
    shutil.rmtree(gone)

    worker = cli("worker", "--once", "--poll", "0.1", db=db_url, timeout=90)

    assert worker.returncode == 0, worker.stderr
    assert "Traceback" not in worker.stderr
    failures = [e for e in json_lines(cli("log", broken, "--json", db=db_url).stdout) if e["event"] == "WorkerFailed"]
    assert len(failures) == 1, failures
    assert "is gone" in failures[0]["data"]["error"] and failures[0]["data"]["retry_in_s"] is None
    shown = cli("log", broken, db=db_url)
    assert "WorkerFailed" in shown.stdout and "not retried" in shown.stdout
    audited = json_lines(cli("audit", "--session", broken, "--errors", "--json", db=db_url).stdout)
    assert [row["kind"] for row in audited] == ["worker_failure"], audited
    ran = [s for s in json_lines(cli("sessions", "--json", db=db_url).stdout) if s["session_id"] == good]
    assert ran and ran[0]["turns"] == 1


def test_a_tool_module_that_exits_on_import_does_not_stop_the_worker(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    module = workspace / "exiting_tool.py"
    module.write_text("from chronicle import tool\n\n@tool\ndef ping() -> str:\n    '''Answer pong.'''\n    return 'pong'\n")
    broken = submit(sqlite_url, script, workspace, "a", "--tools", "exiting_tool:ping")
    good = submit(sqlite_url, script, workspace, "b")
    module.write_text("import sys\nsys.exit(3)  # a script that parses its arguments at import\n")

    worker = cli("worker", "--once", "--poll", "0.1", db=sqlite_url, timeout=90)

    assert worker.returncode == 0, worker.stdout + worker.stderr
    failures = [e for e in json_lines(cli("log", broken, "--json", db=sqlite_url).stdout) if e["event"] == "WorkerFailed"]
    assert len(failures) == 1 and "exiting_tool:ping" in failures[0]["data"]["error"], failures
    ran = [s for s in json_lines(cli("sessions", "--json", db=sqlite_url).stdout) if s["session_id"] == good]
    assert ran and ran[0]["turns"] == 1


def test_an_unexpected_failure_is_recorded_with_its_retry_delay_and_secrets_masked(sqlite_url, workspace, tmp_path, monkeypatch):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    sid = UUID(submit(sqlite_url, script, workspace, "a"))
    monkeypatch.setenv("SOME_API_KEY", "very-secret-value")
    store = ChronicleStore(sqlite_url)
    worker = Worker(store, Overrides(), WorkerOptions(once=True), log=lambda line: None, name="w1")

    async def fail_twice() -> None:
        for _ in range(2):
            worker._back_off(sid, RuntimeError("boom with very-secret-value inside\nsecond line"))

    import asyncio

    asyncio.run(fail_twice())
    events = [e for _, e in store.events_with_positions([sid]) if type(e).__name__ == "WorkerFailed"]
    assert [(e.worker, e.failures, e.retry_in_s) for e in events] == [("w1", 1, 5.0), ("w1", 2, 10.0)]
    assert events[0].error == "RuntimeError: boom with *** inside"
    assert events[0].timestamp <= datetime.now(timezone.utc)
    store.close()
