"""Who draws the live part of `chronicle chat` (the spinner, the preview of an answer streaming in).

In a terminal two things draw while a turn runs: the live part and the line editor that reads
steering. They used to draw independently, a rich `Live` redrawing from its own thread with cursor
moves counted from where it last left the cursor, prompt_toolkit redrawing its line and printing
other output above it; each moved the cursor where the other did not expect, and once the spinner
drew over the line of the prompt just sent. Now one renderer owns the screen at a time:

- while the editor is open (`host`), prompt_toolkit draws the live part above the line being edited,
  at its own redraws (`above`, refreshed by the editor); rich only renders it into a string;
- otherwise (no editor: stdin is a pipe, an approval read by `input()`, steering ended with Ctrl-D),
  a rich `Live` draws it, as before.

What is printed between turns, and above the editor while it is open, stays rich's printing.
"""

from __future__ import annotations

import io
from typing import Any, Callable, cast

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

#: The live display leaves sys.stdout alone: the steering editor swaps it (for output above the line being
#: edited) while a display may start or stop, and one putting back what the other replaced lost all output after.
KEEP_STDOUT: dict[str, Any] = {"redirect_stdout": False, "redirect_stderr": False}
#: A rich live display's last line, left empty, as the editor's line sits under the live part it draws.
ROOM = Text("")


class LiveArea:
    """The live part of the chat screen: `show` a renderable, `clear` it; drawn by whoever owns the screen."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._shown: RenderableType | None = None
        self._rate = 10.0
        self._live: Live | None = None
        #: Set while an editor draws the live part: asks it to redraw now rather than at its next refresh.
        self._redraw: Callable[[], None] | None = None
        #: Renders the live part into a string for the editor, in the colours the terminal's console uses.
        self._paint = Console(file=io.StringIO(), force_terminal=True, color_system=cast(Any, console.color_system),
                              no_color=console.no_color, highlight=False, emoji=False, legacy_windows=False)

    @property
    def active(self) -> bool:
        return self._shown is not None

    @property
    def hosted(self) -> bool:
        return self._redraw is not None

    def show(self, renderable: RenderableType, refresh_per_second: float = 10.0) -> None:
        self._shown, self._rate = renderable, refresh_per_second
        if self._redraw is not None:
            self._redraw()
        elif self._live is None:
            self._start_live(renderable)
        else:
            self._live.update(Group(renderable, ROOM))

    def clear(self) -> None:
        self._shown = None
        self._stop_live()
        if self._redraw is not None:
            self._redraw()

    def host(self, redraw: Callable[[], None]) -> None:
        """An editor opens and draws the live part from now on: a rich display still running is erased
        first (before the editor draws, so nothing else moves the cursor meanwhile)."""
        self._stop_live()
        self._redraw = redraw

    def unhost(self) -> None:
        """The editor has closed (its lines erased): rich draws what is still live."""
        if self._redraw is None:
            return
        self._redraw = None
        if self._shown is not None:
            self._start_live(self._shown)

    def above(self) -> str:
        """The live part as text with ANSI styles, for the editor to draw above its line ("" for none):
        rendered anew at each redraw (the spinner's frame is the time's), one column short of the width
        (a line as wide as the terminal wraps the cursor) and cut to leave the editor's line on screen,
        the last line kept showing "..." as rich's display does."""
        shown = self._shown
        if shown is None:
            return ""
        width, height = self.console.size
        self._paint.width = max(width - 1, 20)
        with self._paint.capture() as captured:
            self._paint.print(shown)
        lines = captured.get().rstrip("\n").split("\n")
        room = max(height - 1, 1)
        if len(lines) > room:
            lines = lines[: room - 1] + ["..."]
        return "\n".join(lines)

    def _start_live(self, renderable: RenderableType) -> None:
        self._live = Live(Group(renderable, ROOM), console=self.console, transient=True,
                          refresh_per_second=self._rate, **KEEP_STDOUT)
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
