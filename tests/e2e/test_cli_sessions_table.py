"""The `sessions` table says `queued (N)` for an idle session whose inputs wait for a worker (its JSON keeps
`status` `idle` beside `queued`), and `idle` once they have run (both backends)."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, write_script


def _row(table: str, sid: str) -> str:
    (line,) = [line for line in table.splitlines() if line.startswith(sid[:8])]
    return line


def test_an_idle_session_with_inputs_waiting_reads_queued_in_the_table(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("one"))], [response(text("two"))]])
    submitted = cli("submit", "first", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    sid = submitted.stdout.strip()
    assert cli("submit", "second", "--session", sid, db=db_url).returncode == 0

    (row,) = json_lines(cli("sessions", "--json", db=db_url).stdout)
    assert (row["status"], row["queued"]) == ("idle", 2)
    assert "queued (2)" in _row(cli("sessions", db=db_url, env={"COLUMNS": "120"}).stdout, sid)

    ran = cli("worker", "--once", db=db_url)
    assert ran.returncode == 0, ran.stderr
    line = _row(cli("sessions", db=db_url, env={"COLUMNS": "120"}).stdout, sid)
    assert "queued" not in line and " idle " in line
