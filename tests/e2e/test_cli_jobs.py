"""Background jobs through the real CLI on both backends: submitted, run by a worker, listed with a status
read from the session, cancelled before a worker starts them (never run), recorded in audit, and never
"cancelled" once they have ended."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests import processes
from tests.helpers import cli, json_lines, response, text, write_script


def test_a_job_is_run_by_a_worker_a_cancelled_one_never_starts_and_an_ended_one_cannot_be_cancelled(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("Report written."))], [response(text("never"))]])
    provider = f"scripted:{script}"
    submitted = cli("jobs", "submit", "write the report", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    first = json_lines(submitted.stdout)[0]
    assert first == {**first, "status": "queued", "prompt": "write the report", "origin": "cli", "turns": 0}
    second = json_lines(cli("jobs", "submit", "another", "--provider", provider, "--workspace", str(workspace), "--json",
                            db=db_url).stdout)[0]
    cancelled = cli("jobs", "cancel", second["job_id"][:8], "--json", db=db_url)
    assert cancelled.returncode == 0 and json_lines(cancelled.stdout)[0]["status"] == "cancelled"

    worked = cli("worker", "--once", db=db_url)
    assert worked.returncode == 0, worked.stderr
    rows = {r["job_id"]: r for r in json_lines(cli("jobs", "--json", db=db_url).stdout)}
    assert rows[first["job_id"]] == {**rows[first["job_id"]], "status": "completed", "final_text": "Report written.", "turns": 1}
    assert rows[second["job_id"]] == {**rows[second["job_id"]], "status": "cancelled", "turns": 0, "reason": "cancelled by the user"}
    status = cli("jobs", "status", first["job_id"], "--json", db=db_url)
    assert json_lines(status.stdout)[0]["status"] == "completed"
    # without --json it says how the job went: the whole id and its answer, or why it ended
    told = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in cli("jobs", "status", first["job_id"][:8], db=db_url).stdout.splitlines()
            if line.strip() and not line.startswith("`")}
    assert told["job"] == first["job_id"] and told["status"] == "completed" and told["answer"] == "Report written."
    told = cli("jobs", "status", second["job_id"], db=db_url).stdout
    assert "status   cancelled: cancelled by the user" in told and "answer" not in told
    audit = json_lines(cli("audit", "--session", second["job_id"], "--json", db=db_url).stdout)
    assert [e["status"] for e in audit if e["kind"] == "job"] == ["submitted", "cancelled"]

    # A job that already ended cannot be cancelled: one line saying how it ended, exit 1, nothing recorded.
    for job_id, ended in ((first["job_id"], "completed"), (second["job_id"], "cancelled")):
        refused = cli("jobs", "cancel", job_id[:8], "--json", db=db_url)
        assert refused.returncode == 1 and refused.stdout == "", refused.stderr
        assert refused.stderr.strip().startswith(f"error: job {job_id} already ended: {ended}") and refused.stderr.count("\n") == 1
    assert json_lines(cli("jobs", "status", first["job_id"], "--json", db=db_url).stdout)[0]["status"] == "completed"
    audit = json_lines(cli("audit", "--json", db=db_url).stdout)
    assert [(e["session_id"], e["status"]) for e in audit if e["kind"] == "job"] == [
        (first["job_id"], "submitted"), (second["job_id"], "submitted"), (second["job_id"], "cancelled")]


def test_a_session_that_is_not_a_job_is_an_error_and_a_bad_submission_records_nothing(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(run.stdout)[0]["session_id"]
    missing = cli("jobs", "cancel", sid, db=sqlite_url)
    assert missing.returncode == 1 and "is not a job" in missing.stderr
    bad = cli("jobs", "submit", "x", "--provider", "scripted:/nowhere.json", "--workspace", str(workspace), db=sqlite_url)
    assert bad.returncode == 2
    assert cli("jobs", "--json", db=sqlite_url).stdout == ""


def _stderr_on_a_terminal(args: list[str], db: str, cwd: Path, stdin: str = "") -> tuple[str, str]:
    """`chronicle ARGS` with stderr a terminal and stdout a pipe (`job=$(chronicle jobs submit …)` at a prompt)."""
    main, side = pty.openpty()
    env = {**os.environ, "CHRONICLE_DB": db, "COLUMNS": "200", "TERM": "xterm"}
    proc = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=side, env=env, cwd=cwd)
    os.close(side)
    out, _ = proc.communicate(stdin.encode(), timeout=60)
    seen = processes.read_terminal(main)
    assert proc.returncode == 0, seen
    return out.decode(), " ".join(seen.decode(errors="replace").split())


def test_a_submitted_job_prints_its_id_alone_says_what_runs_it_and_the_resume_it_names_runs_it(sqlite_url, workspace, tmp_path):
    """`jobs submit`'s help says it prints the job's id: the next command's argument, as `submit` prints its session's.
    The hints go to a terminal's stderr; a PROMPT of `-` is read from stdin, as for `run` and `submit`."""
    script = write_script(tmp_path / "s.json", [response(text("Done here."))])
    out, said = _stderr_on_a_terminal(["jobs", "submit", "-", "--provider", f"scripted:{script}", "--workspace", str(workspace)],
                                      sqlite_url, tmp_path, stdin="write the report\n")
    job = out.strip()
    assert out == f"{job}\n" and len(job) == 36, out
    assert f"`chronicle worker` runs it, or `chronicle resume {job}` here and now" in said, said
    assert f"`chronicle jobs status {job}` says how it went" in said, said
    assert json_lines(cli("jobs", "status", job, "--json", db=sqlite_url).stdout)[0]["prompt"] == "write the report\n"
    piped = cli("jobs", "submit", "another", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert piped.returncode == 0 and len(piped.stdout.strip()) == 36 and piped.stderr == "", piped.stdout + piped.stderr
    assert cli("resume", job, db=sqlite_url).returncode == 0
    assert json_lines(cli("jobs", "status", job, "--json", db=sqlite_url).stdout)[0]["status"] == "completed"


def test_a_job_cancelled_before_it_started_is_listed_cancelled_everywhere_not_queued_forever(db_url, workspace, tmp_path):
    """`sessions` listed it `queued (1)` (JSON: idle, queued 1), "inputs waiting for a worker", while `jobs` said
    cancelled and `resume --all` had nothing to resume: no worker ever runs that input. Every view now agrees."""
    import httpx

    from tests.server.serving import serving

    script = write_script(tmp_path / "s.json", [response(text("never"))])
    submitted = cli("jobs", "submit", "x", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    job_id = json_lines(submitted.stdout)[0]["job_id"]
    assert cli("jobs", "cancel", job_id, db=db_url).returncode == 0

    table = cli("sessions", db=db_url)
    assert table.returncode == 0, table.stderr
    line = next(row for row in table.stdout.splitlines() if row.startswith(job_id[:8]))
    assert "cancelled" in line.split() and "queued" not in line, table.stdout
    row = json_lines(cli("sessions", "--json", db=db_url).stdout)[0]
    assert (row["session_id"], row["status"], row["queued"]) == (job_id, "cancelled", 0)
    assert json_lines(cli("jobs", "--json", db=db_url).stdout)[0]["status"] == "cancelled"
    assert "nothing to resume" in cli("resume", "--all", db=db_url).stdout

    with serving(db_url, workspace) as base:
        listed = httpx.get(f"{base}/sessions").json()
        assert [(r["session_id"], r["status"], r["queued"]) for r in listed] == [(job_id, "cancelled", 0)]
        assert '<span class="status cancelled">cancelled</span>' in httpx.get(f"{base}/ui/sessions").text
        assert '<span class="status cancelled" id="status">cancelled</span>' in httpx.get(f"{base}/ui/sessions/{job_id}").text
    after = json_lines(cli("jobs", "--json", db=db_url).stdout)[0]
    assert (after["status"], after["turns"]) == ("cancelled", 0), "the server's worker never ran it"

    # Nothing waits to run, so it can be archived as any idle session with nothing queued (it was refused: "inputs queued")
    archived = cli("archive", job_id, db=db_url)
    assert archived.returncode == 0, archived.stderr
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == []
    row = json_lines(cli("sessions", "--all", "--json", db=db_url).stdout)[0]
    assert (row["status"], row["queued"], row["archived"]) == ("cancelled", 0, True)


def test_a_job_cancelled_before_it_started_runs_nothing_more_when_continued(sqlite_url, workspace, tmp_path):
    """`run --session JOB` queued its prompt behind the cancelled input and ran that input first (`↳ an earlier input:
    the job's prompt`), though a cancelled job is not run. It is refused, recording nothing, from the CLI and the library."""
    from chronicle import Agent, Chronicle, ChronicleError

    script = write_script(tmp_path / "s.json", [response(text("ran"))])
    provider = f"scripted:{script}"
    submitted = cli("jobs", "submit", "old job prompt", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url)
    job_id = json_lines(submitted.stdout)[0]["job_id"]
    assert cli("jobs", "cancel", job_id, db=sqlite_url).returncode == 0
    events = len(json_lines(cli("log", job_id, "--json", db=sqlite_url).stdout))
    refused = cli("run", "a new prompt", "--session", job_id, "--provider", provider, db=sqlite_url)
    assert refused.returncode == 1 and "was cancelled before it started" in refused.stderr and "ran" not in refused.stdout, refused
    with Chronicle(sqlite_url) as app, pytest.raises(ChronicleError, match="was cancelled before it started"):
        app.run_sync(Agent(provider=provider), "again", session=job_id)
    assert len(json_lines(cli("log", job_id, "--json", db=sqlite_url).stdout)) == events  # nothing recorded


def test_submitted_sessions_record_the_limit_flags_run_takes_and_a_continued_one_refuses_them(sqlite_url, workspace, tmp_path):
    """`run --budget-usd/--doom-loop/…` records the session's limits; `submit` and `jobs submit`, whose sessions a
    worker runs later, took none of those flags, so such a session could only be limited by chronicle.toml."""
    from chronicle.runtime.store import ChronicleStore

    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    provider = f"scripted:{script}"
    job = cli("jobs", "submit", "x", "--provider", provider, "--workspace", str(workspace), "--budget-usd", "0.5",
              "--doom-loop", "5", db=sqlite_url)
    assert job.returncode == 0, job.stderr
    sid = cli("submit", "y", "--provider", provider, "--workspace", str(workspace), "--max-tool-calls", "7", db=sqlite_url)
    assert sid.returncode == 0, sid.stderr
    store = ChronicleStore(sqlite_url)
    try:
        limits = {name: store.session(store.resolve_session_id(ref.stdout.strip())).spec.limits for name, ref in
                  (("job", job), ("submitted", sid))}
    finally:
        store.close()
    assert (limits["job"]["budget_usd"], limits["job"]["doom_loop"]) == (0.5, 5)
    assert limits["submitted"]["max_tool_calls"] == 7
    refused = cli("submit", "z", "--session", sid.stdout.strip(), "--doom-loop", "2", db=sqlite_url)
    assert refused.returncode == 2 and "the limit flags apply to new sessions" in refused.stderr
    bad = cli("jobs", "submit", "x", "--provider", provider, "--workspace", str(workspace), "--tool-timeout", "0", db=sqlite_url)
    assert bad.returncode == 2
