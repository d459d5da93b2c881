"""Model and tool text cannot drive the terminal, and a person approving sees the whole command (issue 17)."""

from __future__ import annotations

import json
import re

from tests.helpers import cli, response, text, tool_use, write_script

OSC52 = "\x1b]52;c;dG91Y2ggUEFZTE9BRA==\x07"
HIDDEN = "\x1b[8mhidden\x1b[0m"
LONG_COMMAND = "echo " + "harmless " * 20 + "; touch PAYLOAD"
#: What a terminal obeys (runtime/cli/render.py CONTROL), newlines and tabs aside.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SESSION = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_run_and_history_show_escapes_instead_of_obeying_them(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(text(f"hi {OSC52} there {HIDDEN}"), tool_use("t1", "bash", command=f"printf '{HIDDEN}'")),
        response(text(f"bye {OSC52}")),
    ])
    run = cli("run", f"prompt {OSC52}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout + run.stderr and "\x07" not in run.stdout + run.stderr
    assert "\\x1b]52;c;" in run.stdout  # shown, visibly
    sid = SESSION.search(run.stderr + run.stdout).group(0)
    for command in (("history", sid), ("log", sid), ("audit",)):
        shown = cli(*command, db=sqlite_url, env={"COLUMNS": "400"})
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout, command
    assert "\\x1b[8mhidden" in cli("history", sid, db=sqlite_url).stdout


def test_approve_lists_the_whole_input_of_what_it_approves(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("t1", "bash", command=LONG_COMMAND)), response(text("ok"))])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 3, run.stderr
    sid = SESSION.search(run.stderr).group(0)
    approved = cli("approve", sid, db=sqlite_url, env={"COLUMNS": "60"})
    assert approved.returncode == 0, approved.stderr
    assert "touch PAYLOAD" in approved.stdout
    assert "harmless " * 20 in approved.stdout.replace("\n", "")


def test_text_that_spells_an_emoji_code_is_shown_as_written(sqlite_url, workspace, tmp_path):
    """rich replaces ":smile:" with 😄 unless told not to: a transcript would show what nobody wrote."""
    said = "ship it :thumbs_up: then :smile:"
    script = write_script(tmp_path / "s.json", [response(text(said), tool_use("t1", "bash", command="echo :fire:")),
                                                 response(text("done :rocket:"))])
    run = cli("run", "go :tada:", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert said in run.stdout and ":rocket:" in run.stdout
    sid = SESSION.search(run.stderr + run.stdout).group(0)
    shown = cli("history", sid, db=sqlite_url, env={"COLUMNS": "400"}).stdout
    assert said in shown and "go :tada:" in shown and ":fire:" in shown
    for command in (("run", "go :tada:"), ("history", sid), ("log", sid), ("audit",)):
        out = run.stdout if command[0] == "run" else cli(*command, db=sqlite_url, env={"COLUMNS": "400"}).stdout
        assert not {"👍", "😄", "🚀", "🎉", "🔥"} & set(out), command


def test_transcripts_show_control_characters_instead_of_obeying_them(sqlite_url, workspace, tmp_path):
    """`history --format md|html` wrote the title, the prompt and the model's text raw: `cat`-ed, or straight to the
    terminal, a transcript set the window's title and cleared the screen. Both now show them as plain history does."""
    title = "\x1b]0;pwnedtitle\x07"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        response(text(f"hi {OSC52} \x1b[2J"), tool_use("t1", "bash\x1b[2J", command="echo ok")),
        response(text(f"bye \u202eevil {HIDDEN}")),
    ]}, "title": [title]}))
    run = cli("run", f"prompt {OSC52}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    sid = SESSION.search(run.stderr + run.stdout).group(0)
    for fmt in ("md", "html"):
        shown = cli("history", sid, "--format", fmt, db=sqlite_url)
        assert shown.returncode == 0, shown.stderr
        assert not CONTROL.search(shown.stdout), (fmt, shown.stdout)
        assert "\\x1b]52;c;" in shown.stdout and "\\x1b[2J" in shown.stdout and "\\u202eevil" in shown.stdout, fmt
        assert "\\x1b]0;pwnedtitle\\x07" in shown.stdout, fmt  # the title too
    exact = cli("history", sid, "--json", db=sqlite_url)  # what the model reads: as recorded
    assert f"bye \u202eevil {HIDDEN}" in [block["text"] for line in exact.stdout.splitlines() for block in json.loads(line)["content"]
                                          if block["type"] == "text"]


def test_names_and_paths_the_model_chose_cannot_drive_the_terminal(sqlite_url, workspace, tmp_path):
    """A tool name is the model's choice: `run` printed `⚙ evil<ESC>]0;PWN…` raw, and `why` did too. Every console the CLI
    prints with now shows control characters (render.py SafeConsole), whatever the call site forgot."""
    evil = "evil\x1b]0;PWNTOOL\x07\x1b[2J"
    path = "f\x1b[2J.txt"
    script = write_script(tmp_path / "s.json", [
        response(tool_use("x1", evil, a=OSC52)),
        response(tool_use("w1", "write_file", path=path, content="data")),
        response(text("bye")),
    ])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert not CONTROL.search(run.stdout + run.stderr), run.stdout + run.stderr
    assert "evil\\x1b]0;PWNTOOL\\x07\\x1b[2J" in run.stdout
    sid = SESSION.search(run.stderr + run.stdout).group(0)
    for command in (("why", sid, "x1"), ("why", sid, "w1"), ("history", sid), ("log", sid), ("audit",), ("undo", sid)):
        shown = cli(*command, db=sqlite_url, env={"COLUMNS": "400"})
        assert shown.returncode == 0, (command, shown.stderr)
        assert not CONTROL.search(shown.stdout + shown.stderr), (command, shown.stdout + shown.stderr)
    assert "\\x1b[2J" in cli("why", sid, "w1", db=sqlite_url).stdout
