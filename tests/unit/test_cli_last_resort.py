"""The CLI's last line of defence (`runtime/cli/app.py` main): a failure raised outside a command's own
error handling still gets the words and exit code the commands give it, and only the unexpected is an
"internal error"."""

from __future__ import annotations

import pytest

from chronicle.runtime.cli import app as cli_app
from chronicle.runtime.store_errors import NotFound, UnknownSession


def run_main(monkeypatch, capsys, raised: Exception) -> tuple[int, str]:
    def command(**_: object) -> None:  # stands for a command whose failure escaped its cli_errors
        raise raised

    monkeypatch.setattr(cli_app, "app", command)
    monkeypatch.delenv("CHRONICLE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        cli_app.main()
    return int(exited.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(("raised", "code", "line"), [
    (NotFound("tool call 1234 names nothing in this store"), 1, "error: tool call 1234 names nothing in this store\n"),
    (UnknownSession("no session matches 'zz'"), 2, "error: no session matches 'zz'\n"),
])
def test_a_known_failure_is_the_commands_error_line_and_code(monkeypatch, capsys, raised, code, line):
    assert run_main(monkeypatch, capsys, raised) == (code, line)


def test_a_read_only_database_says_so(monkeypatch, capsys):
    import sqlite3

    code, err = run_main(monkeypatch, capsys, sqlite3.OperationalError("attempt to write a readonly database"))
    assert code == 1 and err.startswith("error: ") and "read-only" in err and "internal error" not in err


def test_anything_else_is_an_internal_error_on_two_lines(monkeypatch, capsys):
    code, err = run_main(monkeypatch, capsys, KeyError("surprise"))
    assert code == 1
    assert err.splitlines() == ["chronicle: internal error: KeyError: 'surprise'",
                                "Nothing recorded was lost; set CHRONICLE_DEBUG=1 to see the traceback, and please report it."]


def test_a_failure_without_a_message_is_named_by_its_type_alone(monkeypatch, capsys):
    code, err = run_main(monkeypatch, capsys, RuntimeError())
    assert code == 1 and err.splitlines()[0] == "chronicle: internal error: RuntimeError"
