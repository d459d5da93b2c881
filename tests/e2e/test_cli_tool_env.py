"""The variables bash may see, named where README says they can be: `[tools] env_passthrough` in the
workspace's chronicle.toml or CHRONICLE_TOOL_ENV, through the real CLI; a bad name is refused before
anything is recorded, not as an error result of every bash call."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def test_a_variable_named_in_the_tools_table_reaches_bash(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[tools]\nenv_passthrough = ["GOPATH"]\n', encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(tool_use("b1", "bash", command="echo gopath=$GOPATH")), response(text("ok"))])
    ran = cli("run", "show it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=sqlite_url,
              env={"GOPATH": "/opt/go"})
    assert ran.returncode == 0, ran.stderr
    end = next(e for e in json_lines(ran.stdout) if e["type"] == "tool_end")
    assert "gopath=/opt/go" in end["output"]


def test_a_bad_variable_name_is_refused_before_anything_is_recorded(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("never"))])
    for env, toml in (({"CHRONICLE_TOOL_ENV": "bad name!"}, None), ({}, '[tools]\nenv_passthrough = ["OK", "no-dash"]\n')):
        if toml:
            (workspace / "chronicle.toml").write_text(toml, encoding="utf-8")
        refused = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url, env=env)
        assert refused.returncode == 2 and "not environment variable names" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []
