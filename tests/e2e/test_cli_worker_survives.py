"""A worker survives one damaged session: it names it once, leaves it out and runs the others,
instead of exiting (every worker on the store stopped by one bad row) or retrying it every poll."""

from __future__ import annotations

import json

from tests.helpers import cli, json_lines, response, text, write_script
from tests.tamper import Tamper


def test_a_session_with_an_undecodable_event_is_left_out_and_the_others_run(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    submitted = [json.loads(cli("submit", p, "--provider", f"scripted:{script}", "--workspace", str(workspace),
                                "--json", db=db_url).stdout)["session_id"] for p in ("a", "b")]
    broken, good = submitted
    tamper = Tamper(db_url)
    for position in tamper.positions():
        oid, version, topic, _ = tamper.event(position)
        if str(oid) == broken and topic.endswith("Session.InputQueued"):
            tamper.set_state(position, b"not json")

    worker = cli("worker", "--once", "--poll", "0.1", db=db_url, timeout=90)

    assert worker.returncode == 0, worker.stderr
    named = [line for line in worker.stderr.splitlines() if f"leaving session {broken} out" in line]
    assert len(named) == 1 and "cannot be decoded" in named[0], worker.stderr
    assert "Traceback" not in worker.stderr
    ran = [s for s in json_lines(cli("sessions", "--json", db=db_url).stdout) if s["session_id"] == good]
    assert ran and ran[0]["turns"] == 1
