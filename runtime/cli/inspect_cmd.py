"""Read commands over the event store: sessions, log, history."""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app.fork_origin import origin_of
from chronicle.runtime.app.session_listing import current_listing, tree_order

from .common import (
    DbOption,
    JsonOption,
    NoPagerOption,
    cli_errors,
    err_console,
    fail,
    locate_store,
    open_located,
    open_store,
    out_console,
    paged,
    pasted,
    print_json,
    print_json_rows,
    store_command,
)
from .render import UNPRICED, ascii_json, short, unpriced_note, usd
from .tables import Column, fit_table, unique_prefixes

if TYPE_CHECKING:
    from chronicle.runtime.app.queries import LogTail

# `queries` (log, history, and `sessions` when the read models are behind) is imported where it is
# used: it imports the domain, which `sessions` from current read models never needs.


def sessions(
    as_json: JsonOption = False,
    all_sessions: Annotated[bool, typer.Option("--all", help="Archived sessions too (marked archived)")] = False,
    no_pager: NoPagerOption = False,
    db: DbOption = None,
) -> None:
    """List sessions, oldest first (archived ones only with --all).

    On a terminal, a table longer than the screen goes through $PAGER, as `log` does.
    """
    with cli_errors():
        url, read_only = locate_store(db, create=False)
        # From the read models alone when they are current (no store opened, no domain imported);
        # else from the aggregates, which catch the read models up first.
        listing = None if read_only else current_listing(url, archived=all_sessions)
        if listing is not None:
            rows, all_ids = listing.rows, listing.all_ids
            if as_json:
                for row in rows:  # plain JSON values from SQL: no conversion needed
                    sys.stdout.write(json.dumps(row, ensure_ascii=ascii_json()) + "\n")
                return
        else:
            from chronicle.runtime.app import queries

            store = open_located(url, read_only, create=False)
            rows = queries.sessions(store, archived=all_sessions)
            if as_json:
                print_json_rows(rows)
                return
            all_ids = [str(sid) for sid in store.session_ids()]
        if not rows:
            archived = 0 if all_sessions else len(all_ids)
            out_console.print(f"no sessions shown: all {archived} are archived; `{pasted('sessions --all', url)}` lists them"
                              if archived else f"no sessions yet; start one with `{pasted('run PROMPT', url)}` or try "
                              "`chronicle demo`", soft_wrap=True)
            return
        forks = any(row.get("forked_from") for row in rows)
        columns = [
            Column("session"), Column("agent"), Column("status"), Column("turns", justify="right"),
            Column("USD", optional=True, justify="right"), Column("created", optional=True), Column("model", optional=True),
            # only when there is a fork (a store without one reads as it did), and the first optional column to go:
            # a fork in the store must not shift the columns every listing has (it took created's and model's place)
            *([Column("fork of", optional=True, first_to_go=True)] if forks else []),
            Column("title", flex=True),
        ]
        # unique among every session, the archived ones too: a prefix shown must resolve as typed
        short = unique_prefixes([*all_ids, *(row["session_id"] for row in rows)])
        shown = [
            {
                "session": short[row["session_id"]],
                "agent": f"{'  ' * (depth - 1)}↳ {row.get('instance') or row['agent']}" if depth else row["agent"],
                "model": escape(row.get("model") or ""),
                "status": table_status(row), "turns": row["turns"], "USD": usd(row["cost"]),
                "created": row["created_at"][:19].replace("T", " "), "title": escape(row["title"] or ""),
                "fork of": fork_cell(row, short),
            }
            for row, depth in tree_order(rows)
        ]
        known = set(all_ids)
        table = fit_table(columns, shown, out_console.width)
        with paged(no_pager):
            out_console.print(table)
            if any(c.name == "USD" for c in table.columns) and any(r["USD"] == UNPRICED for r in shown):
                out_console.print(escape(unpriced_note("cost null")))  # as `cost` says it, once
            for row in rows:  # a fork imported without the session it was forked from: say so, not leave it to be looked for
                origin = origin_of(row.get("forked_from"), known)
                if origin is not None and not origin.present:
                    out_console.print(escape(f"{short[row['session_id']]} {origin.line()}"), soft_wrap=True)


def fork_cell(row: dict[str, Any], short: dict[str, str]) -> str:
    """The table's `fork of` for a fork: the session it was forked from, as the table shows ids, and the turn
    (`5f355ba9 @ turn 1`), what the JSON's `forked_from` says; without it a fork read as one more session."""
    origin = origin_of(row.get("forked_from"), ())
    if origin is None:
        return ""
    shown = short.get(origin.session_id) or origin.session_id[:8]  # an origin not in this store has no prefix here
    return f"{shown} @ turn {origin.turn}" if origin.turn else shown


def table_status(row: dict[str, Any]) -> str:
    """The table's status: an idle session with inputs waiting for a worker says `queued` (its JSON `status` stays
    the session's own, `idle`, beside `queued`, the count), since `idle` alone read as "nothing to do"; an idle one
    whose last turn did not complete says how it ended (`idle (last: failed)`: the JSON's `last_turn_status`)."""
    if row["archived"]:
        return "archived"
    if row["status"] == "idle" and row.get("queued"):
        return f"queued ({row['queued']})"
    last = row.get("last_turn_status")
    if row["status"] == "idle" and last not in (None, "completed"):
        return f"idle (last: {last})"
    return str(row["status"])


def log(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    as_json: JsonOption = False,
    tree: Annotated[bool, typer.Option("--tree", help="Interleave the events of its sub-agent sessions, by position")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing events as they are recorded; Ctrl-C stops (exit 0)")] = False,
    no_pager: NoPagerOption = False,
    db: DbOption = None,
) -> None:
    """Show every stored event of a session, its turns and tool calls, in commit order."""
    from chronicle.runtime.app import queries

    with cli_errors():
        tail = queries.LogTail(open_store(db, create=False), session, tree=tree)
        entries = tail.read()
        if not as_json:
            _say_fork_origin(tail.store, tail.session_id)
        if follow:
            _follow(tail, entries, as_json, tree)
            return
        if as_json:
            print_json_rows(entries)
            return
        rows = [_log_row(e, tree) for e in entries]
        with paged(no_pager):
            out_console.print(fit_table(_log_columns(tree), rows, out_console.width))


FOLLOW_POLL_S = 0.3


def _follow(tail: LogTail, entries: list[dict[str, Any]], as_json: bool, tree: bool) -> None:
    """Print what is there, then each event as it is committed, until Ctrl-C (a normal way to stop: exit 0)."""
    try:
        while True:
            for entry in entries:
                if as_json:
                    print_json(entry)
                else:
                    row = _log_row(entry, tree)
                    agent = f"{row['agent']}  " if tree else ""
                    out_console.print(f"{row['pos']:>6}  {row['time']}  {agent}{row['aggregate']}  {row['event']}  "
                                      f"{row['status']}  {row['detail']}", soft_wrap=True)
            sys.stdout.flush()
            time.sleep(FOLLOW_POLL_S)
            entries = tail.read()
    except KeyboardInterrupt:
        return


def _log_columns(tree: bool) -> list[Column]:
    return [
        Column("pos", justify="right"), Column("time", optional=True), *([Column("agent")] if tree else []),
        Column("aggregate"), Column("event"), Column("status", optional=True), Column("detail", flex=True),
    ]


def _log_row(e: dict[str, Any], tree: bool) -> dict[str, Any]:
    return {
        "pos": e["position"], "time": e["timestamp"][11:23], "agent": f"{'  ' * e['depth']}{e.get('instance') or e['agent']}" if tree else "",
        "aggregate": f"{e['aggregate']} {e['aggregate_id'][:8]}", "event": e["event"], "status": e["status"] or "",
        "detail": escape(describe(e)),
    }


def describe(entry: dict[str, Any]) -> str:
    data = entry["data"]
    event = entry["event"]
    if entry["aggregate"] == "tool_call":
        if event == "Requested":
            return f"{data['name']} {short(data.get('input'), 60)}"
        if event == "Approved":
            how = "always, " if data.get("always") else ""
            return short(f"{how}{_by(data)}" + (f": {data['reason']}" if data.get("reason") else ""), 70)
        if event == "Denied":
            return short(f"{_by(data)}: {data.get('reason') or ''}", 70)
        return short(data.get("output") or data.get("reason") or "", 70)
    if (decided := _decision_words(event, data)) is not None:
        return short(decided, 70)
    if event == "ModelResponded":
        response = data["response"]
        kinds = ",".join(b["type"] for b in response.get("content", []))
        return f"step {data['step']}: {response.get('stop_reason')} [{kinds}]"
    if event == "ModelCallRetried":
        return short(f"attempt {data['attempt']} failed, retry in {data['delay_s']:.2f}s: {data['reason']}", 70)
    if event == "WorkerFailed":
        retry = "not retried" if data.get("retry_in_s") is None else f"retry in {data['retry_in_s']:g}s"
        return short(f"{retry}: {data.get('error')} ({data.get('worker')})", 70)
    if event == "ModelChanged":
        thinking = "" if data.get("thinking_tokens") is None else f", thinking {data['thinking_tokens']}"
        return short(f"{data.get('previous')} → {data.get('model')}{thinking} by {data.get('actor') or '?'}", 70)
    if event in ("Created", "InputQueued", "InputWithAttachmentsQueued"):
        said = data.get("input_text") or data.get("text") or ""
        if data.get("origin"):
            from chronicle.runtime.app.queries import origin_words

            said = f"{origin_words(data['origin'])}: {said}"
        return short(said, 70)
    if event in ("ReplyDelivered", "ReplyFailed"):
        return short(reply_words(data), 70)
    if entry["aggregate"] == "notes":
        return short(notes_words(event, data), 70)
    return short(data.get("reason") or data.get("final_text") or "", 70)


def _by(data: dict[str, Any]) -> str:
    """Who decided: the actor named (`--actor`, CHRONICLE_ACTOR, X-Chronicle-Actor), else the event's own `by`."""
    who, how = data.get("actor"), data.get("by")
    if who and how and how not in ("user", who):
        return f"by {who} ({how})"  # as `audit` says it: "by ci@runner (--yes)"
    return f"by {who or how or '?'}"


def _decision_words(event: str, data: dict[str, Any]) -> str | None:
    """A person's or a policy's decision on a session in a line: what was decided and by whom (the log is where an
    auditor reads who steered, undid or cancelled what); None for the other events."""
    def turns(key: str = "turn_ids") -> str:
        n = len(data.get(key) or [])
        return f"{n} turn{'s' if n != 1 else ''}"

    if event == "SteeringQueued":
        return f"{_by(data)}: {data.get('text') or ''}"
    if event == "SteeringDelivered":
        n = len(data.get("steer_ids") or [])
        return f"{n} message{'s' if n != 1 else ''} at step {data.get('step')}"
    if event == "CancelRequested":
        return f"{_by(data)}: {data.get('reason') or ''}"
    if event in ("TurnsUndone", "TurnsRedone"):
        return f"{turns()} {_by(data)}" + (", with their files" if data.get("files") else "")
    if event in ("Archived", "Unarchived", "CredentialCancelled"):
        return _by(data) + (f": {data['reason']}" if data.get("reason") else "")
    if event == "Compacted":
        return f"{turns()} ({data.get('strategy')})"
    return None


def notes_words(event: str, data: dict[str, Any]) -> str:
    """A shared-notes event in a line: the note written or deleted, or what a fork's board started with."""
    if event == "Inherited":
        names = [note["name"] for note in data.get("notes") or []]
        return (f"{len(names)} note{'s' if len(names) != 1 else ''} from {str(data.get('from_session_id'))[:8]} "
                f"at turn {data.get('turn')}: {', '.join(names)}")
    if event in ("Written", "Deleted"):
        return f"{data.get('name')} by {str(data.get('session_id'))[:8]}"
    return ""


def reply_words(data: dict[str, Any]) -> str:
    """A channel reply in a line: "to alice via signal: delivered (HTTP 200, 1 attempt)"."""
    how = f"HTTP {data['status']}" if data.get("status") is not None else "no answer"
    attempts = f"{data.get('attempts')} attempt{'s' if data.get('attempts') != 1 else ''}"
    outcome = "delivered" if "error" not in data else f"failed: {data['error']}"
    whom = f"findings of routine {data['routine']}" if data.get("routine") else f"to {', '.join(data.get('senders') or ['?'])}"
    return f"{whom} via {data.get('channel')}: {outcome} ({how}, {attempts})"


def history(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    at: Annotated[Optional[int], typer.Option("--at", min=1, help="As it was when turn TURN (from 1) had completed")] = None,
    version: Annotated[Optional[int], typer.Option("--version", min=1, help="As of the session's N-th event")] = None,
    step: Annotated[Optional[int], typer.Option(
        "--step", min=0, help="With --at TURN: what the model was sent for that turn's step N (numbered from 0, as `log` shows)",
    )] = None,
    as_json: JsonOption = False,
    fmt: Annotated[str, typer.Option("--format", help="text (default), md (Markdown) or html: a transcript to read or hand on")] = "text",
    no_pager: NoPagerOption = False,
    db: DbOption = None,
) -> None:
    """Show the messages the model will see next (the active branch), in Anthropic format; or as they were."""
    from chronicle.runtime.app import queries

    with store_command(db, create=False) as store:
        if as_json and fmt != "text":  # --json is the model's messages; --format a transcript: two outputs
            fail(f"--json and --format {fmt} are two outputs: give one", 2)
        sid = store.resolve_session_id(session)
        if not as_json:
            _say_fork_origin(store, sid)
        if as_json:
            for wire in queries.history(store, sid, at=at, version=version, step=step):  # the past without a Message model
                print_json(wire)
            return
        if fmt != "text":
            from . import transcript

            messages = queries.history_messages(store, sid, at=at, version=version, step=step)
            render = {"md": transcript.markdown, "markdown": transcript.markdown, "html": transcript.html}.get(fmt)
            if render is None:
                fail(f"--format takes text, md or html (got {fmt!r})", 2)
            present = at is None and version is None and step is None
            labels = queries.input_origin_labels(store, sid) if present else None
            sys.stdout.write(render(str(sid), store.session(sid).title, messages, labels))
            return
        shown = queries.history(store, sid, at=at, version=version, step=step)  # wire dicts: every field a block's model has
        present = at is None and version is None and step is None
        if not shown:
            _say_nothing_shown(store, sid, version if not present else None)
            return
        with paged(no_pager):
            out_console.print(transcript_lines(shown, queries.input_origin_labels(store, sid) if present else None))


def _say_nothing_shown(store: Any, session_id: Any, version: int | None) -> None:
    """Why the transcript is empty, on stderr: an empty screen and exit 0 read as a broken command, while
    the session is only new, waiting for a worker, or undone back to its start."""
    if version is not None:
        err_console.print(f"no messages as of event {version} of session {session_id}: its first input has not run by then",
                          soft_wrap=True)
        return
    session = store.session(session_id, copy=False)
    if session.redo_stack:
        err_console.print(f"session {session_id} has no messages on its branch: every turn was undone; "
                          f"`{pasted(f'redo {session_id}', store.url)}` puts the last one back", soft_wrap=True)
        return
    if session.queue:
        why = (f"{len(session.queue)} input(s) wait to run (`{pasted(f'resume {session_id}', store.url)}` runs them here, "
               "or a `chronicle worker`)")
    else:
        why = "its first turn is running" if session.active_turn_id is not None else "no turn has run yet"
    err_console.print(f"session {session_id} has no messages yet: {why}", soft_wrap=True)


def _say_fork_origin(store: Any, session_id: Any) -> None:
    """A fork's origin on stderr, beside what `log` and `history` print: the turns it inherits are the
    origin's, and a fork imported without that session says it is not in this store."""
    from chronicle.runtime.app.fork_origin import fork_origin

    origin = fork_origin(store, store.session(session_id, copy=False))
    if origin is not None:
        err_console.print(escape(origin.line()), soft_wrap=True)


def transcript_lines(messages: list[dict[str, Any]], labels: dict[int, str] | None = None) -> Any:
    """Every message as a rule naming its role, then its blocks, printed in one call: a rule and a
    print per message went through the console's whole machinery each time, most of `history` on
    a long session. The same lines as those calls printed (tests/unit/test_history_text.py)."""
    from rich.console import Group
    from rich.rule import Rule

    rules: dict[str, Any] = {}
    items: list[Any] = []
    for index, message in enumerate(messages):
        role = message["role"]
        if labels and index in labels:  # a channel's input: "user · from alice via signal"
            title = out_console.render_str(f"[green]{role}[/] [dim]· {escape(labels[index])}[/]", style="rule.text",
                                           highlight=False)
            items.append(Rule(title, align="left"))
        elif role not in rules:
            colour = "green" if role == "user" else "cyan"
            title = out_console.render_str(f"[{colour}]{role}[/]", style="rule.text", highlight=False)  # as Rule renders a str
            rules[role] = Rule(title, align="left")
        if not (labels and index in labels):
            items.append(rules[role])
        for block in message["content"]:
            items.extend(_pieces(out_console.render_str(render_block(SimpleNamespace(**block)), highlight=False)))
    return Group(*items)


#: Characters of a block printed as one rich Text at most. rich splits a Text's rendered lines with a
#: `str.partition` per line of what is left, quadratic in a block's length: a 5 MB prompt took `history` 55 s.
PIECE = 16_384


def _pieces(text: Any) -> list[Any]:
    """A long block as consecutive Texts cut at newlines (the newline itself dropped: each piece ends a line
    as it did), so printing is linear and shows the same lines; a block without a newline to cut at stays whole."""
    plain = text.plain
    if len(plain) <= PIECE:
        return [text]
    offsets: list[int] = []
    start = 0
    while len(plain) - start > PIECE:
        cut = plain.rfind("\n", start, start + PIECE)
        if cut < 0:
            cut = plain.find("\n", start + PIECE)
            if cut < 0:
                break
        offsets += [cut, cut + 1]
        start = cut + 1
    return list(text.divide(offsets))[::2] if offsets else [text]


def render_block(block: Any) -> str:
    from rich.markup import escape

    from .render import printable

    if block.type == "text":
        return escape(printable(block.text))
    if block.type == "thinking":
        return f"[dim italic]{escape(printable(block.thinking))}[/]"
    if block.type == "tool_use":
        return f"[cyan]⚙ {escape(block.name)}[/] {escape(short(block.input, 200))} [dim]({escape(block.id)})[/]"
    if block.type == "tool_result":
        mark = "[red]✗[/]" if block.is_error else "[green]✓[/]"
        return f"{mark} [dim]({escape(block.tool_use_id)})[/] {escape(short(block.content, 200))}"
    return f"[dim]{escape(block.type)}[/]"
