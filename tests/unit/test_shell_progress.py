"""What the bash tool streams as progress: the newest complete line, at most every quarter second,
nothing for a command done sooner — whatever the chunk boundaries of its output."""

from __future__ import annotations

from pathlib import Path

from chronicle.runtime.tools.base import ToolContext
from chronicle.runtime.tools.shell import Progress


class Shown(ToolContext):
    """A tool context that keeps the updates it is given instead of sending them to a session."""

    def __init__(self) -> None:
        super().__init__(workspace=Path("."))
        self.shown: list[str] = []

    def update(self, detail: str, status: str = "running") -> None:
        self.shown.append(detail)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(*steps: tuple[float, bytes]) -> list[str]:
    """Chunks at the given seconds after the command started; the updates they produced."""
    ctx, clock = Shown(), Clock()
    progress = Progress(ctx, clock=clock)
    start = clock.now
    for at, chunk in steps:
        clock.now = start + at
        progress.seen(chunk)
    return ctx.shown


def test_a_command_done_within_a_quarter_second_shows_no_progress():
    assert feed((0.0, b"one\n"), (0.1, b"two\nthree\n"), (0.2, b"four\n")) == []


def test_the_update_is_the_newest_complete_line_of_the_chunk():
    assert feed((0.3, b"one\ntwo\nthree\n")) == ["three"]


def test_a_line_still_being_printed_is_not_shown_but_the_one_before_it_is():
    assert feed((0.3, b"one\ntwo\nthr")) == ["two"]


def test_a_line_split_across_chunks_is_shown_whole():
    assert feed((0.1, b"compiling mod"), (0.2, b"ule a"), (0.3, b"nd b\nlinking")) == ["compiling module and b"]


def test_crlf_line_endings_are_not_shown():
    assert feed((0.3, b"step 1\r\nstep 2\r\n")) == ["step 2"]


def test_updates_come_at_most_every_quarter_second():
    shown = feed(*[(0.3 + i * 0.05, f"line {i}\n".encode()) for i in range(12)])
    assert shown == ["line 0", "line 5", "line 10"]


def test_blank_lines_do_not_hide_the_line_printed_before_them():
    assert feed((0.3, b"tests passed\n\n  \n")) == ["tests passed"]


def test_a_line_printed_in_the_quiet_quarter_second_is_shown_when_output_next_arrives():
    """The line ended inside the throttle window is still the newest complete line when the next
    chunk (here a progress bar without a newline) comes: it is shown then, not lost."""
    assert feed((0.1, b"downloading model\n"), (0.4, b"[####      ] 40%")) == ["downloading model"]


def test_a_very_long_line_is_shown_by_its_end():
    shown = feed((0.3, b"x" * 100_000 + b"END\n"))
    assert len(shown) == 1 and shown[0].endswith("END") and len(shown[0]) <= Progress.KEEP
