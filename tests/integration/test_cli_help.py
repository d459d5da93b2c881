"""Every command's --help renders, and says each default its help text mentions.

Rich markup used to swallow `[default: ...]` written into help strings (it reads square brackets
as style tags), so the text a user needed vanished without an error. This walks the real
command tree, so a command added later is checked too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from chronicle.runtime.cli.app import app
from tests.helpers import cli

COMMAND = typer.main.get_command(app)


def every_command(group: Any = COMMAND, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, group)]
    if isinstance(getattr(group, "commands", None), Mapping):  # the root's is lazy: a lookup imports the command
        for name, sub in sorted(group.commands.items()):
            found += every_command(sub, (*path, name))
    return found


def flat(text: str) -> str:
    """The help as words: box drawing and line wrapping removed."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_every_command_and_subcommand_prints_its_help_with_the_defaults_its_help_strings_mention():
    runner = CliRunner()
    commands = every_command()
    assert len(commands) > 20 and ("projections", "rebuild") in [p for p, _ in commands]
    for path, command in commands:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120", "TERM": "dumb"})
        assert result.exit_code == 0, f"chronicle {' '.join(path)} --help: {result.output}"
        shown = flat(result.output)
        for param in command.params:
            help_text = getattr(param, "help", None) or ""
            for mention in re.findall(r"\(default[^)]*\)", help_text):
                assert flat(mention) in shown, f"chronicle {' '.join(path)} --help lost {mention!r} of {param.name}"
            assert "[default" not in help_text, f"{param.name} of {' '.join(path) or 'chronicle'}: rich markup swallows [default: ...]"


#: Square-bracketed text in a help string, as rich shows it: `\\[x]` (escaped) prints as `[x]`.
BRACKETED = re.compile(r"\\?\[[^\]\s][^\]]*\]")


def test_every_square_bracketed_name_in_a_help_string_is_shown_not_read_as_markup():
    """`[skills]`, `[mcp.NAME]`, `[routines.NAME]` name tables of chronicle.toml; unescaped, rich read them
    as style tags and printed "chronicle.toml's  dirs" and "defined by  tables"."""
    runner = CliRunner()
    for path, command in every_command():
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
        shown = flat(result.output)
        texts = [command.help or "", *(getattr(param, "help", None) or "" for param in command.params)]
        if isinstance(getattr(command, "commands", None), Mapping):
            texts += [sub.get_short_help_str(limit=10_000) for sub in command.commands.values()]
        for text in texts:
            for mention in BRACKETED.findall(text):
                assert flat(mention.lstrip("\\")) in shown, f"chronicle {' '.join(path)} --help lost {mention!r}"


def test_the_installed_command_shows_the_tool_timeout_default():
    result = cli("run", "--help")
    assert result.returncode == 0
    assert "(default: 180)" in flat(result.stdout) and "(default: 8)" in flat(result.stdout)


def test_command_help_is_paragraphs_without_hard_line_breaks_that_rich_would_print_ragged():
    import inspect

    for path, command in every_command():
        text = inspect.cleandoc(command.help or "")
        broken = [line for line in re.split(r"\n\n+", text) if "\n" in line]
        assert not broken, f"chronicle {' '.join(path)}: join these lines into one paragraph: {broken}"


def test_shell_completion_is_offered_for_the_common_shells():
    from tests.helpers import cli

    shown = cli("--show-completion", "bash")
    assert shown.returncode == 0 and "complete" in shown.stdout and "_chronicle_completion()" in shown.stdout


@pytest.mark.parametrize("args, marker", [
    (["--show-completion", "zsh"], "#compdef chronicle"),
    (["--show-completion=fish"], "complete --command chronicle"),
    (["--show-completion", "pwsh"], "Register-ArgumentCompleter"),
])
def test_the_shell_named_wins_over_the_shell_detected(args, marker):
    """The tests run under bash: a script for another shell shows that the name was used."""
    from tests.helpers import cli

    shown = cli(*args)
    assert shown.returncode == 0, shown.stderr
    assert marker in shown.stdout and "_CHRONICLE_COMPLETE" in shown.stdout


def test_an_unknown_shell_is_one_line_naming_the_shells():
    from tests.helpers import cli

    shown = cli("--show-completion", "tcsh")
    assert shown.returncode == 2 and shown.stdout == ""
    assert shown.stderr.strip().splitlines() == [
        "error: --show-completion: 'tcsh' is not a shell Chronicle completes; "
        "give one of bash, zsh, fish, powershell, pwsh"
    ]


def test_a_completion_option_asked_for_help_explains_itself_and_installs_nothing(tmp_path):
    from tests.helpers import cli

    for option in ("--install-completion", "--show-completion"):
        shown = cli(option, "--help", env={"HOME": str(tmp_path)})
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"Usage: chronicle {option} [SHELL]") and "SHELL" in shown.stdout.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []  # nothing installed


def test_install_completion_writes_the_named_shells_script(tmp_path):
    from tests.helpers import cli

    installed = cli("--install-completion", "bash", env={"HOME": str(tmp_path)})
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "chronicle.sh"
    assert "_CHRONICLE_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


def test_the_installed_script_completes_command_names():
    """What the script asks `chronicle` for, answered with typer's completion classes."""
    from tests.helpers import cli

    bash = cli(env={"_CHRONICLE_COMPLETE": "complete_bash", "COMP_WORDS": "chronicle hist", "COMP_CWORD": "1"})
    assert bash.returncode == 0 and bash.stdout.split() == ["history"]
    zsh = cli(env={"_CHRONICLE_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "chronicle ses"})
    assert zsh.returncode == 0 and '"sessions":' in zsh.stdout


def test_the_empty_listings_name_the_table_to_add_with_its_brackets(tmp_path):
    """`chronicle mcp list` and `routines list` with nothing configured say which chronicle.toml table
    to add; rich read `[mcp.NAME]` as a style tag and printed "(add  tables)"."""
    mcp = cli("mcp", "list", "--workspace", str(tmp_path))
    assert mcp.returncode == 0 and "(add [mcp.NAME] tables)" in mcp.stdout, mcp.stdout + mcp.stderr
    routines = cli("routines", "list", "--workspace", str(tmp_path))
    assert routines.returncode == 0 and "add a [routines.NAME] table" in routines.stdout, routines.stdout + routines.stderr
