"""What `chronicle chat` reads from the person at the keyboard: a line editor in a terminal, plain
lines from a pipe.

In a terminal, prompt_toolkit edits the line (arrows, Home/End, Ctrl-R search), keeps a history
file beside the store (`chat_history`, readable by its owner only, with secrets cut as the store
cuts them; the tools may not read the store's directory), and takes multi-line input:
Esc then Enter (or Alt-Enter) inserts a line break, Enter sends. From a pipe (scripts,
tests) lines are read as they come, as `input()` does. In both, a line ending in a backslash
continues on the next one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from chronicle.runtime.config import sqlite_path

HISTORY_FILE = "chat_history"
CONTINUATION = "... "


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def history_path(store_url: str | None) -> Path:
    """Beside a SQLite store; for PostgreSQL, in the user's state directory (XDG_STATE_HOME)."""
    base = sqlite_path(store_url) if store_url and store_url.startswith("sqlite:") else None
    if base is not None:
        return base.parent / HISTORY_FILE
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "chronicle" / HISTORY_FILE


class LineReader:
    """`read(prompt)` returns one message (maybe of several lines); EOFError at the end of input,
    KeyboardInterrupt on Ctrl-C, as `input()` raises them."""

    def __init__(self, store_url: str | None = None, editor: bool | None = None) -> None:
        self._read: Callable[[str], str] = _piped_input
        self._session: Any = None
        #: A line editor (a terminal); only then can a line be read while a turn runs (`read_async`).
        self.editor = bool(editor if editor is not None else interactive())
        if self.editor:
            self._session = _editor(history_path(store_url))
            self._read = self._session.prompt
        else:
            from .common import lenient

            lenient(sys.stdin)  # a line that is not UTF-8 is cleaned (chat_cmd.py `utf8_text`), not a crash

    def read(self, prompt: str) -> str:
        lines = [self._read(prompt)]
        while lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1]
            lines.append(self._read(CONTINUATION))
        return "\n".join(lines)

    def read_secret(self, prompt: str) -> str:
        """A credential auth mode waits for: in a terminal not echoed and kept out of the history file."""
        if not self.editor:
            return self._read(prompt)
        import getpass

        return getpass.getpass(prompt)

    async def read_async(self, prompt: str, above: Callable[[], str] | None = None) -> str:
        """`read` in the line editor without holding the event loop (chat reads steering while a turn
        runs). Output printed meanwhile appears above the line being edited. `above` gives lines (with
        ANSI styles) that the editor draws above its line, asked anew at each redraw and at least ten
        times a second: chat's spinner, drawn so by the one renderer that owns the screen while the
        editor is open (chat_screen.py). Ctrl-C is the KeyboardInterrupt it is for `read` (the
        terminal sends no SIGINT while the editor has it)."""
        from prompt_toolkit.formatted_text import ANSI
        from prompt_toolkit.patch_stdout import patch_stdout

        def message(text: str) -> Any:
            if above is None:
                return text

            def with_above() -> Any:
                lines = above()
                return ANSI(f"{lines}\n{text}") if lines else text
            return with_above

        async def one(text: str) -> str:
            line: str = await self._session.prompt_async(message(text), handle_sigint=False, set_exception_handler=False,
                                                         refresh_interval=0.1 if above is not None else 0)
            return line

        app = self._session.app
        app.erase_when_done = True  # the caller shows what became of the line instead
        refresh = self._session.refresh_interval  # the session keeps a prompt's refresh: the next `read` wants its own
        try:
            with patch_stdout(raw=True):  # raw: rich's colours pass through
                lines = [await one(prompt)]
                while lines[-1].endswith("\\"):
                    lines[-1] = lines[-1][:-1]
                    lines.append(await one(CONTINUATION))
        finally:
            app.erase_when_done = False
            self._session.refresh_interval = refresh
        return "\n".join(lines)

    def redraw(self) -> None:
        """Ask the editor to redraw now (what `above` gives has changed); nothing when it is not open."""
        if self._session is not None:
            self._session.app.invalidate()


def _piped_input(prompt: str) -> str:
    """`input(prompt)` from a pipe, whose prompt goes to stdout: when stdout's reader has gone (`chat < script | head`),
    chat goes on reading and running its inputs, as `run` goes on (cli/pipes.py), instead of dying on the prompt."""
    try:
        return input(prompt)
    except BrokenPipeError:  # raised writing the prompt, before a line was read
        from .pipes import reader_gone

        reader_gone(sys.stdout)
        return input(prompt)


def _redacted(file_history: Any) -> Any:
    """prompt_toolkit's FileHistory, writing each line with its secrets cut, as the store records it:
    the file is a second copy of all that is typed, beside the store. This session's Up arrow still
    recalls the line as typed (prompt_toolkit keeps it in memory); only the file is redacted."""
    from chronicle.runtime.secret_scan import scanner_for

    class RedactedHistory(file_history):  # type: ignore[misc,valid-type]
        def store_string(self, string: str) -> None:
            super().store_string(scanner_for(None).text(string).value)

    return RedactedHistory


def _editor(history: Path) -> Any:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    # Not Ctrl-J: an Enter typed ahead while the model answers arrives as one (the terminal is not
    # in raw mode then), and it must send, as Enter does.
    @bindings.add("escape", "enter")
    @bindings.add("escape", "c-j")  # Esc, Enter typed ahead (no raw mode yet: Enter arrives as Ctrl-J)
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    store: Any
    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        history.touch(mode=0o600, exist_ok=True)
        os.chmod(history, 0o600)
        store = _redacted(FileHistory)(str(history))
    except OSError:
        store = InMemoryHistory()  # a read-only store directory: edit without keeping history
    session: PromptSession[str] = PromptSession(
        history=store, key_bindings=bindings, multiline=False,
        prompt_continuation=lambda width, line, soft: CONTINUATION.rjust(width),
    )
    return session
