"""A scripted provider's whole script is checked when it is loaded: a typo anywhere in it (here a
stop_reason) is one line and exit 2 before anything is recorded, not a failed session at run time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli, json_lines, response, text, write_script


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_typo_in_a_later_stop_reason_is_refused_at_load_and_nothing_is_recorded(db_url, workspace, tmp_path, command):
    script = write_script(tmp_path / "s.json", [response(text("fine")), response(text("typo"), stop="end_trun")])
    result = cli(command, "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "agents.main.1.stop_reason" in lines[0] and "end_turn" in lines[0]
    if db_url.startswith("sqlite"):  # a first run refused creates no store at all
        assert not Path(db_url.removeprefix("sqlite:///")).exists()
        return
    listed = cli("sessions", "--json", db=db_url)
    assert listed.returncode == 0 and json_lines(listed.stdout) == []
