"""An 80-column terminal: every word of every command's help readable (wrapped, never cut with `…`), and a width
that means nothing (COLUMNS=0) taken as unset rather than as a terminal no output fits in."""

from __future__ import annotations

import pytest

from tests.helpers import cli, json_lines, response, text, write_script


def _help(args: tuple[str, ...], columns: int) -> str:
    shown = cli(*args, "--help", env={"COLUMNS": str(columns)})
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


@pytest.mark.parametrize("args", [("run",), ("chat",), ("resume",), ("submit",), ("worker",), ("jobs", "submit"),
                                  ("serve",), ("history",), ("audit",)])
def test_help_at_80_columns_cuts_no_word(args):
    """`.chronicle/chronicle.…` and `CHRONICLE_MAX_ATTEMPT…`: the column `<float range> [x>=0.001]` left the help
    text some 23 columns, and a longer word was cut."""
    narrow, wide = _help(args, 80), _help(args, 400)
    assert narrow.count("…") == wide.count("…"), narrow
    words = {w.strip("│╭╮╰╯─") for w in wide.split()}
    assert {w for w in words if any(c.isalnum() for c in w) and w not in narrow} == set(), narrow
    assert max(len(line) for line in narrow.splitlines()) <= 80


def test_a_range_is_still_stated_beside_a_short_metavar():
    shown = _help(("run",), 80)
    assert "<float> [x>=0.001]" in shown and "<int> [x>=1]" in shown and "range>" not in shown


def test_columns_0_is_taken_as_unset(sqlite_url, workspace, tmp_path):
    """`COLUMNS=0 chronicle sessions` printed nothing, exit 0."""
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    sid = json_lines(cli("run", "hello there", "--provider", f"scripted:{script}", "--workspace", str(workspace),
                         "--json", db=sqlite_url).stdout)[0]["session_id"]
    for args in (("sessions",), ("log", sid)):
        shown = cli(*args, db=sqlite_url, env={"COLUMNS": "0"})
        assert shown.returncode == 0 and sid[:8] in shown.stdout, (args, shown.stdout, shown.stderr)
