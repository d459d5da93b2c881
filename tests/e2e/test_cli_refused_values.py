"""Values the CLI took silently and did something else with: each is now refused on one line, exit 2, before any
work. A script whose variable is unset passes '' (`audit --tool "$TOOL"`), which meant no filter at all."""

from __future__ import annotations

import pytest

from tests.helpers import cli, json_lines, response, text, write_script


def one_line(result) -> str:  # noqa: ANN001
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_a_lease_beyond_a_day_is_refused_before_the_worker_starts(sqlite_url):
    """1e20 started a worker saying `lease 1e+20 s`, whose first claim would overflow the lease's expiry."""
    line = one_line(cli("worker", "--once", "--lease-s", "99999999999999999999", db=sqlite_url, timeout=30))
    assert line == "error: --lease-s takes a finite number ≥ 0.5 and ≤ 86400 (a day) (got 1e+20)"
    assert "≤ 86400" in one_line(cli("resume", "--all", "--lease-s", "86401", db=sqlite_url, timeout=30))
    done = cli("worker", "--once", "--lease-s", "86400", db=sqlite_url, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("flag", ["--since", "--tool", "--session"])
def test_an_empty_audit_filter_is_refused_not_taken_as_none(sqlite_url, workspace, tmp_path, flag):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    assert cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url).returncode == 0
    assert json_lines(cli("audit", "--json", db=sqlite_url).stdout)  # there is something an empty filter would show
    for value in ("", "  "):
        assert one_line(cli("audit", flag, value, "--json", db=sqlite_url)) == \
            f"error: {flag} is empty: give a value, or leave {flag} out"


def test_history_json_with_a_format_is_refused(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    sid = json_lines(cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                         db=sqlite_url).stdout)[0]["session_id"]
    assert one_line(cli("history", sid, "--format", "md", "--json", db=sqlite_url)) == \
        "error: --json and --format md are two outputs: give one"
    assert cli("history", sid, "--format", "text", "--json", db=sqlite_url).returncode == 0  # the default, said


def test_keygen_refuses_an_empty_path_and_a_directory(tmp_path):
    """'' was taken as '.', said as `. exists; not overwriting a key`."""
    assert one_line(cli("keygen", "", cwd=tmp_path)) == "error: KEYFILE is empty: name the file to write the private key to"
    assert "is a directory" in one_line(cli("keygen", str(tmp_path)))
    assert list(tmp_path.iterdir()) == []
    made = cli("keygen", str(tmp_path / "k.pem"))
    assert made.returncode == 0 and (tmp_path / "k.pem.pub").exists()
