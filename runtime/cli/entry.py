"""The `chronicle` executable's first step: answer `--version` before importing any command.

Every command module imports what it runs (the store, the loop, providers), so importing the
command table costs most of a second; a version check needs none of it.
"""

from __future__ import annotations

import sys


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"chronicle {version('chronicle-agent')}"
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "chronicle (not installed)"


#: completion.SHOW and completion.INSTALL, named here so that looking costs no import of typer.
COMPLETION_OPTIONS = ("--show-completion", "--install-completion")


def completion_asked(args: list[str]) -> tuple[str, str | None] | None:
    """`(option, shell or None)` when the command line is one completion option and perhaps a shell.

    The shell's name is optional, which typer's parser cannot express.
    """
    if not args:
        return None
    option, equals, named = args[0].partition("=")
    if option not in COMPLETION_OPTIONS or len(args) > (1 if equals else 2):
        return None
    return option, named if equals else (args[1] if len(args) == 2 else None)


def unset_nonsense_width() -> None:
    """COLUMNS=0 (or LINES=0) is taken as not set: rich took it as a width of 0 and `sessions` or `log` printed
    nothing at all, exit 0. Before any console is made (they read it once)."""
    import os

    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name, "")
        if value.strip().isdigit() and int(value) == 0:
            del os.environ[name]


def main() -> None:
    unset_nonsense_width()
    from .pipes import closed_streams_opened, reader_may_go

    closed_streams_opened()  # `<&-`: an empty stdin, not a crash on `sys.stdin.isatty()`
    output_encodes_anything()
    with reader_may_go():  # `chronicle … | head -1`: a reader gone is a quiet exit, or no exit at all mid-turn
        command()


def output_encodes_anything() -> None:
    """On a terminal or pipe whose encoding is not UTF-8 (`PYTHONIOENCODING=latin-1`, LC_ALL=C without UTF-8 mode),
    what it cannot encode is written as `\\u2026` instead of failing the command with UnicodeEncodeError: the CLI's
    own `…` and `—` did that to nearly every command. `--json` escapes every character outside ASCII there instead
    (render.py `ascii_json`), so that it stays JSON."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
        if encoding not in ("utf8", "utf8sig"):
            try:
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
            except (AttributeError, ValueError):  # not a TextIOWrapper: as it is
                pass


def command() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        sys.stdout.write(version_text() + "\n")
        return
    from chronicle.runtime.collector import hold_for_start_up

    hold_for_start_up()  # until the store is open (cli/common.py open_located): imports make no garbage
    asked = completion_asked(sys.argv[1:])
    if asked:
        from .completion import run as complete

        raise SystemExit(complete(*asked))
    from .app import main as run

    run()


if __name__ == "__main__":  # `python -m chronicle.runtime.cli.entry`; `python -m chronicle` is the name to use
    main()
