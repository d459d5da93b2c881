"""`chronicle repairs`: what self-repair found (stuck turns, broken tools) and what it did, as recorded."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from chronicle.runtime.self_repair import (
    DEFAULT_STUCK_AFTER_S,
    DEFAULT_TOOL_FAILURES,
    SelfRepair,
    repair_row,
)

from .common import (
    DbOption,
    JsonOption,
    finite_at_least,
    out_console,
    print_json_rows,
    store_command,
)
from .render import short
from .tables import Column, fit_table

StuckOption = Annotated[float, typer.Option(
    "--stuck-after", callback=finite_at_least(0), help="Seconds without an event after which a turn in flight is stuck")]
FailuresOption = Annotated[int, typer.Option("--tool-failures", min=1, help="Failed runs in a row after which a tool is broken")]


def repairs(
    check: Annotated[bool, typer.Option("--check", help="Look for stuck turns and broken tools now (as workers do) before listing")] = False,
    stuck_after: StuckOption = DEFAULT_STUCK_AFTER_S,
    tool_failures: FailuresOption = DEFAULT_TOOL_FAILURES,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Self-repair: stuck turns (in flight with no event for --stuck-after seconds) handed to resume, and broken tools (--tool-failures failed runs in a row). JSON per repair: `repair_id`, `kind` (stuck_turn, broken_tool), `target`, `session_id`, `status` (retrying, resolved, failed, manual_required), `result` (retry, success, failed, manual_required), `detail`, `attempts`, `detected_at`."""  # noqa: E501
    with store_command(db, create=False) as store:
        monitor = SelfRepair(store, stuck_after_s=stuck_after, tool_failures=tool_failures)
        if check:
            monitor.check()
        rows = [repair_row(r) for r in monitor.repairs()]
        if as_json:
            print_json_rows(rows)
            return
        if not rows:
            out_console.print("no repairs: no stuck turn or broken tool has been found")
            return
        columns = [Column("kind"), Column("target"), Column("session"), Column("status"), Column("detail", flex=True)]
        table = [{"kind": r["kind"], "target": escape(r["target"][:36]), "session": (r["session_id"] or "")[:8],
                  "status": f"[red]{r['status']}[/]" if r["status"] in ("failed", "manual_required") else r["status"],
                  "detail": escape(short(r["detail"], 200))} for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))
