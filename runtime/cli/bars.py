"""Progress bars of long commands (`verify`, `export`, `doctor`, `projections rebuild|check`): on stderr, at a
terminal only.

Where stderr is a file or a pipe (`chronicle projections check --json 2>&1 | head`, a cron job's log) a bar is
noise: rich prints its last frame there, one line per bar, mixed into what a script reads. With `--json` there
is none either, whatever stderr is. Each command asks here, so that all of them decide the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from .common import err_console

#: What each phase a library call reports is called on the bar.
LABELS = {"chain": "checking the chain", "snapshots": "checking snapshots", "reading": "reading the session",
          "writing": "writing the bundle", "log": "checking the log"}


def bars_shown(as_json: bool = False) -> bool:
    """Whether a command draws progress bars: stderr is a terminal and the output is not JSON."""
    return not as_json and err_console.is_terminal


class Tracker:
    """`tracker(phase, done, total)`, the reporter a library call takes (`total` None while unknown): it remembers
    the last report (for the line a Ctrl-C prints, cli/interrupts.py) and moves the bar, if there is one."""

    def __init__(self, update: Optional[Callable[[str, int, Optional[int]], None]] = None) -> None:
        self.update = update
        self.phase: Optional[str] = None
        self.done = 0
        self.total: Optional[int] = None

    def __call__(self, phase: str, done: int, total: Optional[int]) -> None:
        self.phase, self.done, self.total = phase, done, total
        if self.update is not None:
            self.update(phase, done, total)


@contextmanager
def progress_bar(as_json: bool = False, transient: bool = True) -> Iterator[Tracker]:
    """One bar whose label is the phase under way, where bars are shown (`bars_shown`); a Tracker either way.

    Transient: the bar is gone when the command ends, and its result line says what was done."""
    if not bars_shown(as_json):
        yield Tracker()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=transient) as bar:
        task = bar.add_task("", total=None)
        yield Tracker(lambda phase, done, total: bar.update(task, description=LABELS.get(phase, phase), completed=done,
                                                            total=total))
