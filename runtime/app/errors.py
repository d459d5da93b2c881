"""The one error a use case raises for a request it cannot carry out; clients choose how to show it.

`code` is the exit code the CLI uses for it (2: the request is wrong — a bad argument, an unknown
id, a setting that cannot work; 1: the request is fine but the state forbids it now; 3: paused for
an approval), so every client reports the same failure the same way without re-deciding it.
"""

from __future__ import annotations

import sys
from typing import Any

#: AppError.kind of a request naming something that does not exist (a session, a tool call): HTTP 404, whatever the
#: exit code (an unknown session id as typed is 2, a missing id found inside the store 1).
NOT_FOUND = "not_found"
#: AppError.kind of a store that cannot be used now (store_errors.StoreUnavailable): HTTP 503.
UNAVAILABLE = "unavailable"
#: AppError.kind of a PostgreSQL database or schema a reader found no store in (store_open.open_store): to
#: `resume --all`, nothing to resume, as for a SQLite file that does not exist.
NO_STORE = "no_store"


class AppError(Exception):
    """`kind` says what sort of refusal it is where the exit code alone does not (NOT_FOUND, or None): a client that
    answers in other terms (the HTTP server's status codes) decides on it, never on the message's words."""

    def __init__(self, message: str, code: int = 1, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind

    @property
    def not_found(self) -> bool:
        return self.kind == NOT_FOUND


class DefinitionError(AppError, ValueError, TypeError):
    """A definition given in code that cannot work (an Agent's field, a @tool's option, a server setting): code 2,
    as a flag the CLI refuses. Also a ValueError and a TypeError because that is what these definitions raised
    before they were AppErrors: a program catching either still catches it, and one catching ChronicleError
    no longer meets a raw one (the public API's contract: only ChronicleError escapes)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 2)

    @classmethod
    def of(cls, exc: BaseException) -> "DefinitionError":
        """`exc` (a ValueError or TypeError of a definition check) with its words, on one line."""
        return exc if isinstance(exc, DefinitionError) else cls(first_line(exc))


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its type's name when it has none): what an error line shows."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def cause_line(exc: BaseException) -> str:
    """`Type: first line of its message` (the type alone when it has none): what a log line names an unexpected failure by."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: A write refused by a read-only database, said plainly (it used to be an "internal error").
READ_ONLY_WRITE = ("the store is read-only, so this could not be recorded; nothing was changed. "
                   "Read commands still work; copy the store somewhere writable (or fix its permissions) to continue")


def known_failure(exc: BaseException, url: str | None = None) -> AppError | None:
    """The AppError a client shows for an expected failure raised below the use cases (an id that names nothing, a row
    that does not decode, a read-only database, a chronicle.toml that cannot work), or None for an unexpected one,
    whose traceback is wanted. The CLI's error line and the library's ChronicleError both come from here, so a
    program and a person get the same words and code: the library let some of these through raw before.

    `url`: the store's, to name it in a store failure (a damaged file, a full disk, a held lock).

    Modules are looked up in sys.modules, not imported: one never imported raised nothing, and importing it (the
    settings import the loop's hooks and tools) would cost a read command its start-up."""
    if isinstance(exc, AppError):
        return exc
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in str(exc):
        # A byte that is not UTF-8 (Python's lone surrogate for it), given where no client cleaned it first
        return AppError(f"a text given holds a byte that is not UTF-8 ({exc.object[exc.start:exc.end]!r} at {exc.start}); "
                        "Chronicle records text as UTF-8: give it as UTF-8", 2)
    modules = sys.modules.get
    store, marks = modules("chronicle.runtime.store_errors"), modules("chronicle.runtime.shred_marks")
    if store and isinstance(exc, store.UnknownSession):  # a session id as typed is an argument: a usage error
        return AppError(str(exc), 2, kind=NOT_FOUND)
    if store and isinstance(exc, store.NotFound) and not getattr(exc, "forgotten", False):  # erased is found, not missing
        return AppError(str(exc), 1, kind=NOT_FOUND)
    if store and isinstance(exc, (store.NotFound, store.UnreadableEvent)) or marks and isinstance(exc, marks.ForgottenContent):
        return AppError(str(exc), 1)
    if store and (trouble := store_trouble(store, exc, url)) is not None:
        return trouble
    if store and isinstance(exc, store.StoreUnavailable):
        return AppError(f"the store is unavailable: {first_line(exc)}", 1, kind=UNAVAILABLE)
    if store and store.is_connection_lost(exc):
        return AppError(f"the store is unavailable: {first_line(exc)}; check that the database server is running and "
                        "reachable, then try again", 1, kind=UNAVAILABLE)
    if store and store.is_read_only_error(exc):
        return AppError(f"{READ_ONLY_WRITE} ({first_line(exc)})", 1)
    read_models = modules("chronicle.runtime.read_models")
    if read_models and isinstance(exc, read_models.ReadModelsMissing):
        return AppError(str(exc), 1)
    engine = modules("chronicle.projections.engine")
    if engine and isinstance(exc, engine.ProjectionStuck):  # a catch-up outside `caught_up` (`projections run`, a worker)
        return AppError(str(exc), 1)
    settings, skills, loops = modules("chronicle.runtime.settings"), modules("chronicle.runtime.skills"), modules("chronicle.runtime.app.loops")
    if (settings and isinstance(exc, settings.SettingsError) or skills and isinstance(exc, skills.SkillError)
            or loops and isinstance(exc, loops.LoopSetupError)):
        return AppError(str(exc), 2)
    return None


def store_trouble(store: Any, exc: BaseException, url: str | None) -> AppError | None:
    """A damaged SQLite file, a full disk or a write lock held past the busy timeout, said as what it is and what to
    do (exit 1). Every command met them as "internal error … Nothing recorded was lost … please report it", which
    for a damaged file was false and for the others sent a person to report a bug instead of freeing space or
    waiting for the other process."""
    from ..config import redact, sqlite_path  # loaded already: every command resolved its store's URL with them

    path = sqlite_path(url) if url else None
    named = str(path) if path is not None else redact(url) if url else None
    if isinstance(exc, store.StoreDamaged):
        return AppError(str(exc), 1)
    if store.is_damaged(exc):
        where = f"the store {named}" if named else "the store's file"
        return AppError(f"{where} is damaged ({first_line(exc)}): `chronicle doctor` names what; "
                        f"{store.damage_advice(path or 'FILE')}", 1)
    if store.is_disk_full(exc):
        where = f"the store {named}" if path is not None else "the database server's data" if url else "the store"
        return AppError(f"the disk holding {where} is full ({first_line(exc)}): free some space, then run the command "
                        "again; what was recorded before stays whole", 1, kind=UNAVAILABLE)
    if store.is_locked(exc):
        from ..config import sqlite_busy_timeout

        where = f" of {named}" if named else ""
        return AppError(f"the store is unavailable: another process holds the write lock{where} and kept it past "
                        f"CHRONICLE_SQLITE_BUSY_TIMEOUT ({sqlite_busy_timeout()} s; {first_line(exc)}); "
                        "try again once it is done", 1, kind=UNAVAILABLE)
    return None
