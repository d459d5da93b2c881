"""Tables fit the terminal by dropping optional columns, never by cutting ids or numbers."""

from __future__ import annotations

from rich.console import Console

from chronicle.runtime.cli.tables import Column, fit_table

SESSION = "ff9d5b40-63af-4d44-9400-56dd72bcec8e"
COLUMNS = [Column("session"), Column("created", optional=True), Column("USD", optional=True, justify="right"),
           Column("title", flex=True)]
ROWS = [{"session": SESSION, "created": "2026-11-21 22:05:49", "USD": "0.012345", "title": "Tidy up the greeting module " * 3}]


def render(width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(fit_table(COLUMNS, ROWS, width))
    return console.export_text()


def test_a_wide_terminal_shows_every_column():
    text = render(200)
    assert "created" in text and "USD" in text and SESSION in text and "0.012345" in text


def test_a_narrow_terminal_drops_optional_columns_left_first_and_keeps_ids_whole():
    text = render(80)
    assert SESSION in text and "created" not in text and "USD" in text and "…" in text
    text = render(60)
    assert SESSION in text and "created" not in text and "USD" not in text
    assert all(len(line) <= 60 for line in text.splitlines())


def test_a_cells_shown_width_is_what_rich_shows_with_or_without_markup():
    """`_plain` skips rich's markup parser for cells that hold no markup and no :emoji: code; the
    length it gives must be what rich shows for every cell, those included."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from rich.errors import MarkupError
    from rich.text import Text

    from chronicle.runtime.cli.tables import _plain

    pieces = ["a", " ", "[b]", "[/b]", "\\[", "]", ":", ":smile:", "12:05:49", "x:y"]

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(pieces), max_size=8).map("".join))
    def check(cell: str) -> None:
        try:
            shown = Text.from_markup(cell).plain
        except MarkupError:
            return  # rich refuses it either way
        assert _plain(cell) == shown

    check()
    assert _plain("done :smile:") == Text.from_markup("done :smile:").plain == "done \U0001f604"
