"""`chronicle log` and `audit` in a terminal name each decision and who made it: an approval, a denial and its
reason, an undo, a redo, a fork and an archive, each with the actor recorded, as `--json` holds them."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, tool_use, write_script

WIDE = {"COLUMNS": "250"}


def _detail(shown: str, event: str, skip: int = 2) -> list[str]:
    """The detail column of each row of `event` in `log`'s table (in `audit`'s, `skip` 1: no status for these)."""
    found = []
    for line in shown.splitlines():
        cells = line.split()
        if event in cells:
            found.append(" ".join(cells[cells.index(event) + skip:]))
    return found


def test_each_decision_row_says_what_was_decided_and_by_whom(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(tool_use("tu_1", "bash", command="echo one")),
        response(tool_use("tu_2", "bash", command="echo two")),
        response(text("Ran one of them.")),
    ])
    provider = f"scripted:{script}"
    paused = cli("run", "run two commands", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    assert cli("approve", sid, db=sqlite_url, env={"CHRONICLE_ACTOR": "alice"}).returncode == 0
    assert cli("resume", sid, "--workspace", str(workspace), db=sqlite_url).returncode == 3  # the second call waits
    denied = cli("deny", sid, "--reason", "not that file", db=sqlite_url, env={"CHRONICLE_ACTOR": "bob"})
    assert denied.returncode == 0, denied.stderr
    assert cli("resume", sid, "--workspace", str(workspace), db=sqlite_url).returncode == 0
    assert cli("undo", sid, db=sqlite_url, env={"CHRONICLE_ACTOR": "carol"}).returncode == 0
    assert cli("redo", sid, db=sqlite_url, env={"CHRONICLE_ACTOR": "dave"}).returncode == 0
    forked = cli("fork", sid, "--at", "1", db=sqlite_url, env={"CHRONICLE_ACTOR": "fran"})
    assert forked.returncode == 0, forked.stderr
    assert cli("archive", sid, db=sqlite_url, env={"CHRONICLE_ACTOR": "erin"}).returncode == 0
    again = write_script(tmp_path / "s2.json", [response(tool_use("tu_3", "bash", command="echo three")), response(text("ok"))])
    yes = cli("run", "once more", "--session", sid, "--provider", f"scripted:{again}", "--workspace", str(workspace), "--yes",
              db=sqlite_url, env={"CHRONICLE_ACTOR": "ci@runner"})
    assert yes.returncode == 0, yes.stderr

    shown = cli("log", sid, db=sqlite_url, env=WIDE).stdout
    assert _detail(shown, "Approved") == ["by alice", "by ci@runner (--yes)"]
    assert _detail(shown, "Denied") == ["by bob: not that file"]
    assert _detail(shown, "TurnsUndone") == ["1 turn by carol"]
    assert _detail(shown, "TurnsRedone") == ["1 turn by dave"]
    assert _detail(shown, "Archived") == ["by erin"]

    audited = cli("audit", db=sqlite_url, env=WIDE).stdout
    assert _detail(audited, "undo", 1) == ["1 turn by carol"] and _detail(audited, "redo", 1) == ["1 turn by dave"]
    assert _detail(audited, "fork", 2) == [f"from {sid[:8]} at turn 1 by fran"]  # its name column: the agent
