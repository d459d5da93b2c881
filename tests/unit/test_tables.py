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
