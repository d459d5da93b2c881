"""Tables that fit the terminal: optional columns drop out before anything essential is cut.

Rich squeezes every column when a table is too wide (ids become `3a…`, numbers `0.0003…`).
Here the essential columns never wrap or shrink, optional ones are left out from the left
while the table would not fit, and one flexible column takes what is left, cut with "…".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from rich.table import Table

GAP = 2
FLEX_MIN = 16


@dataclass(frozen=True)
class Column:
    name: str
    optional: bool = False
    flex: bool = False
    justify: str = "left"


def fit_table(columns: list[Column], rows: Iterable[dict[str, Any]], width: int) -> Table:
    from .render import printable  # a cell may hold model or tool text: no terminal control gets through

    rows = [{k: "" if v is None else printable(str(v)) for k, v in row.items()} for row in rows]

    widths = {c.name: max([len(c.name), *(len(_plain(row.get(c.name, ""))) for row in rows)]) for c in columns}

    def natural(column: Column) -> int:
        return widths[column.name]

    kept = list(columns)
    while True:
        fixed = sum(natural(c) for c in kept if not c.flex) + GAP * (len(kept) - 1)
        flex_room = FLEX_MIN if any(c.flex for c in kept) else 0
        optional = [c for c in kept if c.optional]
        if fixed + flex_room <= width or not optional:
            break
        kept.remove(optional[0])  # the left-most optional column goes first
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, GAP // 2))
    for column in kept:
        if column.flex:
            table.add_column(column.name, no_wrap=True, overflow="ellipsis", max_width=max(FLEX_MIN, width - fixed - GAP))
        else:
            table.add_column(column.name, no_wrap=True, min_width=natural(column), justify=column.justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(row.get(c.name, "") for c in kept))
    return table


def _plain(text: str) -> str:
    """Length as shown: markup such as [red]…[/] takes no room."""
    if "[" not in text and ":" not in text:
        return text  # no markup, no :emoji: code: parsing it (most cells) was most of a table's build time
    from rich.text import Text

    return Text.from_markup(text).plain


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
