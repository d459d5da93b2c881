"""A usage error is one `error:` line, as every other refusal is: naming the option and what it takes, and the
command whose `--help` says more; exit 2. typer drew five lines for it (the usage, a hint, a boxed message), and
the last-resort handler said `chronicle: error:`, a third form."""

from __future__ import annotations

import pytest

from tests.helpers import cli


@pytest.mark.parametrize(("args", "line"), [
    (("history", "abc", "--at", "0"), "error: invalid value for '--at': 0 is not in the range x>=1; see `chronicle history --help`"),
    (("undo", "abc", "--turns", "0"), "error: invalid value for '--turns': 0 is not in the range x>=1; see `chronicle undo --help`"),
    (("audit", "--limit", "-1"), "error: invalid value for '--limit': -1 is not in the range x>=1; see `chronicle audit --help`"),
    (("audit", "--limit", "x"), "error: invalid value for '--limit': 'x' is not a valid int; see `chronicle audit --help`"),
    (("worker", "--concurrency", "0"),
     "error: invalid value for '--concurrency': 0 is not in the range x>=1; see `chronicle worker --help`"),
    (("serve", "--port", "99999"),
     "error: invalid value for '--port': 99999 is not in the range 0<=x<=65535; see `chronicle serve --help`"),
    (("sessions", "--bogus"), "error: no such option: --bogus; see `chronicle sessions --help`"),
    (("sessions", "--db"), "error: option '--db' requires an argument; see `chronicle sessions --help`"),
    (("projections", "rebuild", "--bogus"), "error: no such option: --bogus; see `chronicle projections rebuild --help`"),
    (("projections", "nosuch"), "error: no such command 'nosuch'; see `chronicle projections --help`"),
    (("nosuch",), "error: no such command 'nosuch'; see `chronicle --help`"),
    (("--bogus", "sessions"), "error: no such option: --bogus; see `chronicle --help`"),
    (("jobs", "submit"), "error: missing argument 'prompt'; see `chronicle jobs submit --help`"),
])
def test_a_usage_error_is_one_line_naming_the_option_and_the_help_to_read(sqlite_url, args, line):
    result = cli(*args, db=sqlite_url)
    assert (result.returncode, result.stdout, result.stderr.splitlines()) == (2, "", [line])


def test_a_failure_outside_a_commands_own_handling_has_the_same_prefix(sqlite_url):
    """The root's --db check raises typer's BadParameter: said the same way."""
    result = cli("--db", "", "sessions")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: invalid value for --db: the store URL is empty")


def test_no_command_still_shows_the_help():
    result = cli()
    assert "Usage: chronicle" in result.stdout + result.stderr and "error:" not in result.stderr


def test_a_path_that_cannot_take_the_bundle_is_a_usage_error_before_any_work(sqlite_url, workspace, tmp_path):
    """As `export --sign DIR`, `import DIR` and `keygen DIR` are (README's exit codes): it was exit 1, after the
    export's work, as if the store had failed."""
    from tests.helpers import json_lines, response, text, write_script

    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    sid = json_lines(cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                         db=sqlite_url).stdout)[0]["session_id"]
    into_dir = cli("export", sid, "-o", str(tmp_path), db=sqlite_url)
    assert into_dir.returncode == 2 and into_dir.stderr.splitlines() == [
        f"error: cannot write {tmp_path}: it is a directory; give the bundle's file name (`-o {tmp_path / 'bundle.json'}`)"]
    nowhere = cli("export", sid, "-o", str(tmp_path / "no" / "b.json"), db=sqlite_url)
    assert nowhere.returncode == 2 and f"{tmp_path / 'no'} is not a directory" in nowhere.stderr
    for args in (("export", sid, "--sign", str(tmp_path)), ("import", str(tmp_path)), ("keygen", str(tmp_path))):
        assert cli(*args, db=sqlite_url).returncode == 2, args
    assert cli("export", sid, "-o", str(tmp_path / "b.json"), db=sqlite_url).returncode == 0
