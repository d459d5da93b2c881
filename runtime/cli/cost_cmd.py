"""`chronicle cost [SESSION] [--by model|day]`: tokens by kind and USD, sub-agents rolled up."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app import queries

from .common import DbOption, JsonOption, cli_errors, fail, hint, open_store, out_console, print_json_rows
from .render import unpriced_note, usd
from .tables import Column, fit_table


def cost(
    session: Annotated[Optional[str], typer.Argument(help="Session id or unique prefix; all sessions if omitted")] = None,
    by: Annotated[Optional[str], typer.Option("--by", help="Split the figures by model or by day (UTC)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Tokens (input, output, cache write, cache read) and USD (null if any call has no known price).

    For SESSION: its own figures (scope "self"), its total with every sub-agent below it ("total"), and one object per direct child ("child", that child's own total). Without SESSION: one object per session, scope "total" (sum the roots for a grand total).
    """
    with cli_errors():
        if by not in (None, "model", "day"):
            fail(f"--by takes model or day, not {by!r}", 2)
        objects = queries.cost(open_store(db, create=False), session, by=by)
        if as_json:
            print_json_rows(objects)
            return
        render(objects, by, db)


def render(objects: list[dict[str, Any]], by: str | None, db: str | None) -> None:
    if not objects:
        out_console.print(f"no sessions yet; start one with `{hint('run PROMPT', db)}`", soft_wrap=True)
        return
    columns = [
        Column("scope"), Column("session"), Column("agent", optional=True), *([Column(by)] if by else []),
        Column("input", justify="right"), Column("output", justify="right"), Column("cache write", optional=True, justify="right"),
        Column("cache read", optional=True, justify="right"), Column("USD", justify="right"),
    ]
    rows = [
        {
            "scope": o["scope"], "session": o["session_id"][:8], "agent": o.get("instance") or o.get("agent") or "", **({by: o.get(by) or ""} if by else {}),
            "input": o["input_tokens"], "output": o["output_tokens"], "cache write": o["cache_creation_input_tokens"],
            "cache read": o["cache_read_input_tokens"],
            "USD": usd(o["usd"]),
        }
        for o in objects
    ]
    table = fit_table(columns, rows, out_console.width)
    out_console.print(table)
    if any(o["usd"] is None for o in objects):  # said once, not as `? (N unpriced)` in each row beside `$` figures
        out_console.print(escape(unpriced_note("usd null, unpriced_calls counts them", by == "model")))
