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
