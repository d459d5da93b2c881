"""Tables that fit the terminal: optional columns drop out before anything essential is cut.

Rich squeezes every column when a table is too wide (ids become `3a…`, numbers `0.0003…`).
Here the essential columns never wrap or shrink, optional ones are left out from the left
(those marked `first_to_go` before the rest) while the table would not fit, and one flexible column takes what is left, cut with "…".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

GAP = 2
FLEX_MIN = 16


@dataclass(frozen=True)
class Column:
    name: str
    optional: bool = False
    flex: bool = False
    justify: str = "left"
    #: An optional column that goes before the other optional ones, wherever it stands: one shown only for
    #: some rows (`sessions`' `fork of`) must not push out the columns every listing has.
    first_to_go: bool = False


def fit_table(columns: list[Column], rows: Iterable[dict[str, Any]], width: int) -> "FittedTable":
    from rich.cells import cell_len  # terminal cells: wide characters take two

    from .render import printable  # a cell may hold model or tool text: no terminal control gets through

    rows = [{k: "" if v is None else printable(str(v)) for k, v in row.items()} for row in rows]

    widths = {c.name: max([len(c.name), *(cell_len(_plain(row.get(c.name, ""))) for row in rows)]) for c in columns}

    def natural(column: Column) -> int:
        return widths[column.name]

    kept = list(columns)
    while True:
        fixed = sum(natural(c) for c in kept if not c.flex) + GAP * (len(kept) - 1)
        flex_room = FLEX_MIN if any(c.flex for c in kept) else 0
        optional = sorted((c for c in kept if c.optional), key=lambda c: not c.first_to_go)
        if fixed + flex_room <= width or not optional:
            break
        kept.remove(optional[0])  # the left-most optional column goes first (a `first_to_go` one before it)
    return FittedTable(kept, [[row.get(c.name, "") for c in kept] for row in rows], max(FLEX_MIN, width - fixed - GAP))


class FittedTable:
    """`fit_table`'s table, drawn as rich draws a borderless `Table` with these columns (each one
    exactly as wide as its widest cell, the flexible one at most `flex_max`, cut with "…").

    The widths are decided here, so each line is put together directly: a rich `Table` measured
    and rendered every cell through its layout engine again, ≈ 18 ms of `log`'s ≈ 150 on a
    50-event session. Cells are read as rich reads a table's strings (markup, and emoji codes where
    the console replaces them, no highlighting); `tests/unit/test_tables.py` requires the same
    text as that `Table`."""

    def __init__(self, columns: list[Column], rows: list[list[str]], flex_max: int) -> None:
        self.columns, self.rows, self.flex_max = columns, rows, flex_max

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Any]:
        from rich.cells import cell_len, set_cell_size
        from rich.text import Text

        # A cell with no markup (and no emoji code, where the console would replace one) is its own
        # text: a row of only such cells is put together as one string, which is most rows of a
        # long `log` (a Text per cell, aligned and appended, was most of drawing 5,000 rows).
        colons_plain = getattr(console, "_emoji", True) is False

        def cell(value: str) -> Text | str:
            if "[" not in value and (colons_plain or ":" not in value):
                return value
            return console.render_str(value, highlight=False)  # type: ignore[no-any-return]

        def shown(value: Text | str) -> int:
            return value.cell_len if isinstance(value, Text) else cell_len(value)

        header: list[Text | str] = [Text(c.name, style="bold") for c in self.columns]
        body = [[cell(value) for value in row] for row in self.rows]
        widths = [max(shown(t) for t in [header[i], *(row[i] for row in body)]) for i in range(len(self.columns))]
        # The flexible column takes at most what the console has left (rich squeezes it the same way).
        room = options.max_width - sum(w for c, w in zip(self.columns, widths, strict=True) if not c.flex) - GAP * (len(widths) - 1)
        widths = [max(1, min(w, self.flex_max, room)) if c.flex else w for c, w in zip(self.columns, widths, strict=True)]
        for n, cells in enumerate((header, *body)):
            if n and all(type(value) is str for value in cells):
                yield Text((" " * GAP).join(_aligned(str(value), column.justify, width, cell_len, set_cell_size)
                                            for column, value, width in zip(self.columns, cells, widths, strict=True)),
                           no_wrap=True, overflow="ellipsis")
                continue
            line = Text(no_wrap=True, overflow="ellipsis")
            gap = Text(" " * GAP, style="bold" if n == 0 else "")  # a header's padding is the header's style
            for i, (column, value) in enumerate(zip(self.columns, cells, strict=True)):
                if i:
                    line.append_text(gap)
                text = value if isinstance(value, Text) else Text(value)
                text.overflow = "ellipsis"
                if column.justify != "left":
                    text.rstrip()  # as rich justifies a cell (rich.containers.Lines.justify)
                text.align(column.justify, widths[i])  # type: ignore[arg-type]
                line.append_text(text)
            yield line


def _aligned(value: str, justify: str, width: int, cell_len: Callable[[str], int], set_cell_size: Callable[[str, int], str]) -> str:
    """What `Text(value)` becomes through `rstrip` (unless left-justified) and `align(justify,
    width)` with the "…" overflow, as a string. rich's cell functions are handed in: imported
    here, they were an import statement per cell of a table of thousands of cells."""
    if justify != "left":
        value = value.rstrip()
    if cell_len(value) > width:
        value = set_cell_size(value, width - 1) + "…"
    excess = width - cell_len(value)
    if excess <= 0:
        return value
    if justify == "right":
        return " " * excess + value
    if justify == "center":
        left = excess // 2
        return " " * left + value + " " * (excess - left)
    return value + " " * excess


def _plain(text: str) -> str:
    """Length as shown: markup such as [red]…[/] takes no room, and an emoji code takes its own
    (our consoles show ":smile:" as written: cli/common.py)."""
    if "[" not in text:
        return text  # no markup: parsing it (most cells) was most of a table's build time
    from rich.text import Text

    return Text.from_markup(text, emoji=False).plain


def unique_prefixes(ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
    """Each id's shortest prefix (at least `minimum` characters) that no other id shares, as git
    abbreviates hashes: a table shows what a person can type back, in a fraction of the width."""
    ordered = sorted(set(ids))

    def common(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    short = {}
    for i, full in enumerate(ordered):
        shared = max([common(full, ordered[j]) for j in (i - 1, i + 1) if 0 <= j < len(ordered)], default=0)
        short[full] = full[: max(minimum, shared + 1)]
    return short
