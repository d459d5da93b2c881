"""`chronicle steer`, `chronicle cancel`, `chronicle compact`: control a session from outside.

Steer and cancel usually run in another process than the turn they act on; they record a
request on the Session and the running loop acts on it (see runtime/controls.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from .common import DbOption, JsonOption, cli_errors, err_console, fail, finite_at_least, open_store, out_console, pasted, print_json, utf8_text
from .lazy import lazy_module
from .render import printable

if TYPE_CHECKING:  # the use cases import the loop, pydantic and the store; `--help` needs none of them
    from chronicle.runtime.app import controls as app_controls
else:
    app_controls = lazy_module("chronicle.runtime.app.controls")

SessionArg = Annotated[str, typer.Argument(help="Session id or unique prefix")]


def steer(
    session: SessionArg,
    message: Annotated[str, typer.Argument(help="What the agent should know or do instead")],
    wait_batch: Annotated[bool, typer.Option("--wait-batch", help="Let every tool of the current step run before the message is delivered")] = False,
    turn: Annotated[Optional[str], typer.Option("--turn", help="Steer only this turn (its whole id): if it has ended, exit 1 and record nothing")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Steer the running turn: MESSAGE reaches the model at the next safe point (between tool calls).

    Tools the model asked for that have not started yet are skipped, with a result saying so; a tool that has started is never stopped by steering. With no turn running, MESSAGE is queued as the session's next input — unless --turn names the turn meant: then a turn that has ended is an error (exit 1) and nothing is recorded.
    """
    with cli_errors():
        if not message.strip():
            fail("the steering message is empty; say what the agent should do", 2)
        message = utf8_text(message, "MESSAGE")
        store = open_store(db, create=False)
        sid = store.resolve_session_id(session)
        result = app_controls.steer(store, sid, message, wait_batch=wait_batch, turn_id=turn)
        if as_json:
            print_json(result.row())
        elif result.outcome == "steering":
            out_console.print(f"steering recorded for turn {result.turn_id} of session {sid}; "
                              "it reaches the model at the next safe point", soft_wrap=True)
        else:
            out_console.print(f"no turn is running on session {sid}: the message was queued as its next input. "
                              f"`{pasted(f'resume {sid}', store.url)}` runs it now, as a worker would "
                              f"(or `{pasted(f'chat --session {sid}', store.url)}`, before your next message).", soft_wrap=True)


def cancel(
    session: SessionArg,
    wait: Annotated[float, typer.Option("--wait", callback=finite_at_least(0), help="Seconds to wait for the running process to confirm")] = 10.0,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Cancel the running turn: the running tool is stopped, the rest get `cancelled` results.

    The session stays usable: its next input continues it normally. Exit 0 also when nothing runs.
    """
    with cli_errors():
        store = open_store(db, create=False)
        result = app_controls.cancel(store, session, wait_s=wait, reason=f"{app_controls.CANCEL_REASON} (chronicle cancel)")
        sid, tid = result.session_id, result.turn_id
        if result.status == "idle":
            text = f"nothing is running on session {sid}; nothing to cancel"
        elif result.status == "auth_cancelled":
            text = f"session {sid} no longer waits for a credential; its next message is an ordinary input"
        elif result.paused:
            text = f"cancelled turn {tid} of session {sid} (it was waiting for approval)"
        elif result.status == "requested":
            from chronicle.runtime.leases import held_by_a_live_process

            if not held_by_a_live_process(store, sid):  # the process that ran it stopped: nothing will confirm
                text = (f"cancel recorded for turn {tid}; no process is running it (the one that did stopped): "
                        f"`{pasted(f'resume {sid}', store.url)}` ends it cancelled, running nothing more")
            else:
                text = (f"cancel requested for turn {tid}; no process confirmed within {wait:g} s. If the process running "
                        f"it died, `{pasted(f'resume {sid}', store.url)}` will honour the request.")
        else:
            text = f"turn {tid} of session {sid}: {result.status}"
        if as_json:
            print_json(result.row())
        else:
            out_console.print(text, soft_wrap=True)


def compact(
    session: SessionArg,
    keep: Annotated[int, typer.Option("--keep", min=0, help="Most recent turns kept verbatim")] = 2,
    strategy: Annotated[str, typer.Option(
        "--strategy", help="summary (a model call) | truncate (drop older turns) | workspace (move them to memory/DATE.md in the workspace)",
    )] = "summary",
    provider: Annotated[Optional[str], typer.Option("--provider", help="Provider for the summary (default: the session's)", show_default=False)] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Compact a session's history: older turns are replaced in context by a summary; the log keeps them."""
    with cli_errors():
        if strategy not in ("summary", "truncate", "workspace"):
            fail(f"unknown strategy {strategy!r}: use summary, truncate or workspace", 2)
        store = open_store(db, create=False)
        sid = store.resolve_session_id(session)
        result = asyncio.run(app_controls.compact(store, sid, strategy, keep, provider))
        if as_json:
            print_json(result.row(sid))
        elif result.ok:
            out_console.print(f"compacted {result.turns_compacted} turn(s) of session {sid} ({result.strategy})")
        else:
            err_console.print(f"[yellow]not compacted:[/] {escape(printable(result.reason))}")
        if result.failed:
            raise typer.Exit(1)
