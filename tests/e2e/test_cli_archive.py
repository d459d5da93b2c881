"""Archiving is how a session is "deleted": an event hides it from `sessions`, `--all` shows it,
`unarchive` brings it back, and its log stays whole (both backends)."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, write_script


def test_archive_hides_a_session_all_shows_it_unarchive_lists_it_again_and_the_log_keeps_everything(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    ids = []
    for prompt in ("keep", "hide"):
        ran = cli("run", prompt, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
        assert ran.returncode == 0, ran.stderr
        ids.append(json_lines(ran.stdout)[0]["session_id"])
    kept, hidden = ids

    archived = cli("archive", hidden[:8], "--json", db=db_url)
    assert archived.returncode == 0, archived.stderr
    assert json_lines(archived.stdout) == [{"session_id": hidden, "archived": True}]
    assert [r["session_id"] for r in json_lines(cli("sessions", "--json", db=db_url).stdout)] == [kept]
    every = {r["session_id"]: r["archived"] for r in json_lines(cli("sessions", "--all", "--json", db=db_url).stdout)}
    assert every == {kept: False, hidden: True}
    table = cli("sessions", "--all", db=db_url).stdout
    assert "archived" in table

    again = cli("archive", hidden, db=db_url)
    assert again.returncode == 1 and "already archived" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    events = [e["event"] for e in json_lines(cli("log", hidden, "--json", db=db_url).stdout)]
    assert "Archived" in events and "ModelResponded" in events  # hidden, never deleted
    assert cli("history", hidden, "--json", db=db_url).returncode == 0

    assert cli("unarchive", hidden, db=db_url).returncode == 0
    assert [r["session_id"] for r in json_lines(cli("sessions", "--json", db=db_url).stdout)] == [kept, hidden]
    audit = [r["kind"] for r in json_lines(cli("audit", "--session", hidden, "--json", db=db_url).stdout)]
    assert "archived" in audit and "unarchived" in audit


def test_with_every_session_archived_sessions_points_to_all_instead_of_saying_there_are_none(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    ran = cli("run", "only", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(ran.stdout)[0]["session_id"]
    assert cli("archive", sid, db=db_url).returncode == 0
    listed = cli("sessions", db=db_url)
    assert listed.returncode == 0 and "all 1 are archived" in listed.stdout and "sessions --all" in listed.stdout
    assert "no sessions yet" not in listed.stdout
