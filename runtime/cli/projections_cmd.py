"""`chronicle projections status | rebuild | run`: see, rebuild and keep the read models current."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from chronicle.projections import ProjectionEngine, UnknownProjection
from chronicle.runtime.bounds import MAX_POLL_S
from chronicle.runtime.pasteable import pasteable

from .bars import bars_shown
from .common import (
    DbOption,
    JsonOption,
    cli_errors,
    err_console,
    fail,
    finite_at_least,
    hint,
    open_store,
    out_console,
    pasted,
    print_json_rows,
    store_command,
)
from .interrupts import noted
from .lazy import lazy_module

if TYPE_CHECKING:  # the read models import the domain's content models (pydantic); `--help` needs none of it
    from chronicle.runtime import parallel_rebuild, read_model_check, read_models
else:
    read_models = lazy_module("chronicle.runtime.read_models")
    parallel_rebuild = lazy_module("chronicle.runtime.parallel_rebuild")
    read_model_check = lazy_module("chronicle.runtime.read_model_check")

app = typer.Typer(
    name="projections",
    help="Read models (history, summaries, cost, audit) built from the event log: status, check, rebuild, run.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _engine(db: str | None) -> ProjectionEngine:
    """For a report: no warning that a read model is being built (ProjectionEngine `announce`), as nothing is."""
    return read_models.projection_engine(open_store(db, create=False), announce=False)


@app.command()
def status(as_json: JsonOption = False, db: DbOption = None) -> None:
    """One line per projection: its position in the log and how many events it is behind."""
    with cli_errors():
        engine = _engine(db)
        rows: list[dict[str, Any]] = [{"name": s.name, "position": s.position, "lag": s.lag, "head": s.head} for s in engine.status()]
        if as_json:
            print_json_rows(rows)
            return
        table = Table("projection", "position", "lag", "log head")
        for row in rows:
            lag = f"[green]{row['lag']}[/]" if row["lag"] == 0 else f"[yellow]{row['lag']}[/]"
            table.add_row(row["name"], str(row["position"]), lag, str(row["head"]))
        out_console.print(table)
        unbuilt = [row["name"] for row in rows if row["position"] == 0 and row["lag"]]
        behind = [row["name"] for row in rows if row["position"] and row["lag"]]
        rebuild = pasted("projections rebuild", engine.app.url)
        if unbuilt:
            err_console.print(f"not built yet: {', '.join(unbuilt)}; built at the next command that reads them "
                              f"(sessions, audit, cost, history --at), or `{rebuild}` with progress", highlight=False)
        if behind:
            err_console.print(f"behind the log: {', '.join(behind)}; they catch up at the next command that reads them, or "
                              f"`{pasted('projections run', engine.app.url)}`", highlight=False)


@app.command()
def rebuild(
    name: Annotated[Optional[str], typer.Argument(help="One projection (history, summaries, cost, audit); all if omitted")] = None,
    db: DbOption = None,
) -> None:
    """Drop a projection's tables (all of them without NAME) and replay the log from zero.

    On PostgreSQL, a long log's read models are rebuilt in two processes (two halves at once)."""
    with cli_errors():
        store = open_store(db, create=False)
        engine = read_models.projection_engine(store, announce=False)  # its bars and lines say what it builds
        names = [name] if name else None
        try:
            chosen = engine.select(names)
        except UnknownProjection as exc:
            fail(f"{exc}", 2)
        with noted(lambda: _left(engine, [p.name for p in chosen], store.url)), _progress(engine, [p.name for p in chosen]) as report:
            parallel_rebuild.rebuild(store, names, progress=report)
        for s in engine.status():
            if s.name in {p.name for p in chosen}:
                err_console.print(f"rebuilt [bold]{s.name}[/] to position {s.position} (lag {s.lag})")


@app.command()
def check(
    name: Annotated[Optional[str], typer.Argument(help="One projection (history, summaries, cost, audit); all if omitted")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Compare the read models with the log, row for row: exit 0 when they agree, 1 naming the rows that differ.

    The hash chain (`verify`) proves the log; `audit`, `history --at`, `sessions` and `cost` read the read models, which a write to the database can change without touching the log. Each is built again from the log in a scratch database (the live tables are only read) up to the position it has reached, and the two are compared."""  # noqa: E501
    with store_command(db, create=False) as store:
        engine = read_models.projection_engine(store)
        try:
            chosen = [p.name for p in engine.select([name] if name else None)]
        except UnknownProjection as exc:
            fail(f"{exc}", 2)
        try:
            with noted(lambda: "projections check stopped before comparing every row; nothing was changed (the live "
                               "read models are only read, the scratch copy is removed)"), \
                    _progress(engine, chosen, as_json) as report:
                checked = read_model_check.check(store, chosen, progress=report)
        except read_model_check.ReadModelsBusy as exc:
            fail(str(exc), 1)
        if as_json:
            print_json_rows([c.row() for c in checked])
        else:
            for c in checked:
                if c.agrees:
                    out_console.print(f"{c.name}: agrees with the log (to position {c.position})", highlight=False)
                    continue
                for d in c.differences:
                    out_console.print(f"{c.name}: {d.table} differs from the log (to position {c.position}): "
                                      f"{len(d.missing)} row(s) the log gives are not there as it gives them, "
                                      f"{len(d.unexpected)} row(s) there the log does not give", highlight=False, soft_wrap=True)
                    for row in d.unexpected[:read_model_check.EXAMPLES]:
                        out_console.print(f"  there:    {_shown(row)}", highlight=False, soft_wrap=True, markup=False)
                    for row in d.missing[:read_model_check.EXAMPLES]:
                        out_console.print(f"  from log: {_shown(row)}", highlight=False, soft_wrap=True, markup=False)
        wrong = [c.name for c in checked if not c.agrees]
        if wrong:
            fail(f"{', '.join(wrong)} differ{'s' if len(wrong) == 1 else ''} from the log, which `verify` proves; "
                 f"`{hint('projections rebuild' + (' ' + wrong[0] if len(wrong) == 1 else ''), db)}` builds "
                 f"{'it' if len(wrong) == 1 else 'them'} again from it", 1)


def _left(engine: ProjectionEngine, names: list[str], url: str) -> str:
    """What an interrupted rebuild leaves: the read models at the lowest position one reached (each batch commits
    with its position), finished by the next command that reads them."""
    rows = [s for s in engine.status() if s.name in names]
    low, head = min((s.position for s in rows), default=0), max((s.head for s in rows), default=0)
    return (f"read models at position {low:,} of {head:,}; they catch up at the next command that reads them, "
            f"or `{pasteable('projections rebuild', url)}`")


def _shown(row: tuple[Any, ...], width: int = 200) -> str:
    text = " | ".join("NULL" if v is None else str(v) for v in row)
    return text if len(text) <= width else text[: width - 1] + "…"


@contextmanager
def _progress(engine: ProjectionEngine, names: list[str], as_json: bool = False) -> Iterator[Any]:
    """A bar per projection at a terminal (bars.py: none where stderr is a file or a pipe, or with --json)."""
    if not bars_shown(as_json):
        yield lambda name, position, top: None
        return
    head = engine.head()
    with Progress(
        TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=False,
    ) as progress:
        tasks = {n: progress.add_task(n, total=max(head, 1)) for n in names}

        def report(name: str, position: int, top: int) -> None:
            progress.update(tasks[name], completed=position, total=max(top, 1))

        yield report
        for n in names:
            progress.update(tasks[n], completed=progress.tasks[tasks[n]].total)


@dataclass
class CatchUpStep:
    """One catch-up: distinct log events applied, and the applications (one per projection that took each)."""

    before: int
    after: int
    events: int
    applications: int
    projections: int

    def line(self) -> str:
        return (f"applied {self.events} new event(s) (positions {self.before + 1}..{self.after}) "
                f"to {self.projections} projection(s), {self.applications} application(s) in all")


def catch_up_step(engine: Any) -> CatchUpStep:
    """Catch up and count what moved: engine.catch_up() sums applications over projections, which is not the number of events a person watching the log saw arrive."""
    before = min((engine.position(p.name) for p in engine.select()), default=engine.head())
    applications = engine.catch_up()
    after = engine.head()
    events = engine.db.count_after(before) - engine.db.count_after(after) if after > before else 0
    return CatchUpStep(before, after, events, applications, len(engine.select()))


@app.command()
def run(
    follow: Annotated[bool, typer.Option("--follow", help="Keep running: apply new events as they are committed")] = False,
    poll: Annotated[float, typer.Option(
        "--poll", callback=finite_at_least(0.01, MAX_POLL_S, "a day"), help="Seconds between looks at the log for new events")] = 0.5,
    db: DbOption = None,
) -> None:
    """Bring every projection up to date; with --follow, keep them current until SIGINT/SIGTERM."""
    with store_command(db) as store:
        engine = read_models.projection_engine(store)
        step = catch_up_step(engine)
        if not follow:
            err_console.print(step.line() if step.events else f"nothing new; projections at position {step.after}")
            return
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        # Polled on both backends: PostgreSQL writers send no NOTIFY per insert (it woke every
        # listening backend on every commit, see runtime/chain_postgres.py), and a look at the
        # log's head every --poll seconds costs one indexed query.
        err_console.print(f"following {store.describe()} (a look every {poll:g} s)")
        try:
            while not stop.is_set():
                step = catch_up_step(engine)
                if step.events:
                    err_console.print(step.line())
                stop.wait(poll)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        err_console.print("stopped; every applied batch is committed with its position")


