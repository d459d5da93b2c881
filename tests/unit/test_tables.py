"""Tables fit the terminal by dropping optional columns, never by cutting ids or numbers."""

from __future__ import annotations

import io

from rich.console import Console
from rich.errors import MarkupError

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
    """`_plain` skips rich's markup parser for cells that hold no markup; the length it gives must
    be what our consoles show for every cell (emoji codes as written), those included."""
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
            shown = Text.from_markup(cell, emoji=False).plain
        except MarkupError:
            return  # rich refuses it either way
        assert _plain(cell) == shown

    check()
    assert _plain("done :smile: [b]now[/b]") == "done :smile: now"


def _as_rich_table(columns: list[Column], rows: list[dict[str, str | None]], width: int):  # noqa: ANN202
    """The table `fit_table` returned before it drew its own lines: a borderless rich Table (its
widths now counted in terminal cells, so that a wide character takes two, as rich counts)."""
    from rich.cells import cell_len
    from rich.table import Table

    from chronicle.runtime.cli.render import printable
    from chronicle.runtime.cli.tables import FLEX_MIN, GAP, _plain

    cells = [{k: "" if v is None else printable(str(v)) for k, v in row.items()} for row in rows]
    widths = {c.name: max([len(c.name), *(cell_len(_plain(row.get(c.name, ""))) for row in cells)]) for c in columns}
    kept = list(columns)
    while True:
        fixed = sum(widths[c.name] for c in kept if not c.flex) + GAP * (len(kept) - 1)
        optional = [c for c in kept if c.optional]
        if fixed + (FLEX_MIN if any(c.flex for c in kept) else 0) <= width or not optional:
            break
        kept.remove(optional[0])
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, GAP // 2))
    for c in kept:
        if c.flex:
            table.add_column(c.name, no_wrap=True, overflow="ellipsis", max_width=max(FLEX_MIN, width - fixed - GAP))
        else:
            table.add_column(c.name, no_wrap=True, min_width=widths[c.name], justify=c.justify)  # type: ignore[arg-type]
    for row in cells:
        table.add_row(*(row.get(c.name, "") for c in kept))
    return table, fixed + (FLEX_MIN if any(c.flex for c in kept) else 0) <= width


def _styled_lines(renderable, width: int) -> list[list[tuple[str, object]]]:  # noqa: ANN001
    """What a terminal shows, character runs with their style (how rich splits them into segments aside)."""
    from rich.segment import Segment

    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor", emoji=False)  # as ours
    shown = []
    for line in Segment.split_and_crop_lines(console.render(renderable), width, pad=False):
        runs: list[list[object]] = []
        for segment in line:
            style = segment.style or None
            if runs and runs[-1][1] == style:
                runs[-1][0] += segment.text  # type: ignore[operator]
            else:
                runs.append([segment.text, style])
        shown.append([(str(text), style) for text, style in runs])
    return shown


def test_the_lines_drawn_are_what_a_rich_table_of_the_same_columns_shows():
    """`FittedTable` draws its lines itself (a rich Table re-measured every cell: ≈ 18 ms of `log`).
    Wherever the table fits, a terminal must show exactly what that Table showed: characters,
    widths, "…", right-justified numbers, bold headers, markup, emoji, wide text. Where even the
    essential columns leave the flexible one less than its minimum, rich squeezed columns its
    own way; these lines keep the essential columns and cut the flexible one to what is left."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = ["a", "word ", "[red]", "[/]", "\\[x]", ":smile:", "12:05", "日本", "⏎", "0.0123", " "]
    cell = st.one_of(st.none(), st.lists(st.sampled_from(pieces), max_size=12).map("".join))
    columns = [Column("pos", justify="right"), Column("time", optional=True), Column("kind"),
               Column("USD", optional=True, justify="right"), Column("detail", flex=True)]
    row = st.fixed_dictionaries({c.name: cell for c in columns})

    @settings(max_examples=200, deadline=None)
    @given(st.lists(row, min_size=1, max_size=5), st.integers(min_value=20, max_value=160))
    def check(rows: list[dict[str, str | None]], width: int) -> None:
        try:
            reference, fits = _as_rich_table(columns, rows, width)
            expected = _styled_lines(reference, width)
        except MarkupError:
            return  # a cell rich refuses as markup is refused either way
        drawn = _styled_lines(fit_table(columns, rows, width), width)
        if fits:
            assert drawn == expected
        else:
            assert all(sum(len(text) for text, _ in line) <= width + 1 for line in drawn)  # + its newline

    check()


def test_rows_of_plain_cells_drawn_as_one_string_each_are_what_the_rich_table_shows():
    """A row with no markup in any cell is put together as one string (most rows of a long `log`):
    wide characters, a right-justified cell with trailing spaces, a cut flexible cell, times."""
    columns = [Column("pos", justify="right"), Column("time", optional=True), Column("kind"),
               Column("USD", optional=True, justify="right"), Column("detail", flex=True)]
    rows = [
        {"pos": "7", "time": "12:05:49.123", "kind": "turn 日本", "USD": "0.01 ", "detail": "a long detail " * 8},
        {"pos": "1234", "time": None, "kind": "tool_call", "USD": "", "detail": "日本語のテキスト " * 6},
        {"pos": "12", "time": "00:00:00.000", "kind": "", "USD": "3", "detail": "short ⏎ :smile:"},
    ]
    for width in (40, 61, 80, 120, 200):
        reference, fits = _as_rich_table(columns, rows, width)
        assert fits
        assert _styled_lines(fit_table(columns, rows, width), width) == _styled_lines(reference, width), width
