"""Whether there is a store to read: what reads a store, or acts on what it holds, never creates one.

Only recording something new (running an agent, submitting, importing, a worker, a routine fired) starts
a store. The CLI's readers refused a SQLite file that does not exist, while the library's
`Chronicle(url).sessions()` opened it and left an empty store behind; both now ask here, and say the same
thing, each with its own way to start one.
"""

from __future__ import annotations

from pathlib import Path

from ..config import DEFAULT_DB_RELATIVE, root_reading, sqlite_path
from ..pasteable import pasteable_in
from .errors import AppError

#: What to do next, by client: (for a store named, for the default looked for upward). The facts before them are
#: the same words for both.
ADVICE = {
    "cli": ("run `chronicle run …` to start one there, or pass another --db", "run `chronicle run …` to start one, or pass --db"),
    "library": ("running an agent there (Chronicle.run, run_sync or submit) starts one; or pass Chronicle() another URL",
                "running an agent (Chronicle.run, run_sync or submit) starts one; or pass Chronicle() a URL or set CHRONICLE_DB"),
}

#: What to do next about a PostgreSQL database or schema with no store, by client.
ADVICE_POSTGRES = {
    "cli": "run `chronicle run …` to start one there, or check --db",
    "library": "running an agent there (Chronicle.run, run_sync or submit) starts one; or check the URL given to Chronicle()",
}


def missing_store(url: str, named: str | None, client: str = "cli") -> AppError | None:
    """The error (exit 1) for reading the store at `url` (resolved) when it is a SQLite file that does not exist;
    None when there is one to open (or it is PostgreSQL, whose open says itself what is wrong).

    `named`: the URL as given (`--db`, CHRONICLE_DB, `Chronicle(url)`), None when the default was looked for upward
    (`.chronicle/chronicle.db`); a relative URL one slash short of an existing file is said so, the usual slip."""
    path = sqlite_path(url)
    if path is None or path.is_file():
        return None
    named_advice, here_advice = ADVICE[client]
    if named:
        meant = root_reading(named)
        slip = f" (sqlite:/// and a path is read from the current directory: for {meant}, write sqlite:///{meant})" if meant else ""
        return AppError(f"no Chronicle store at {path}{slip}; {pasteable_in(named_advice, url)}")
    return AppError(f"no Chronicle store here (no {DEFAULT_DB_RELATIVE} in {Path.cwd()} or above); {here_advice}")


def no_store_in(where: str, url: str, client: str = "cli") -> str:
    """The line for reading a PostgreSQL database and schema (`where`, as `store_identity.NoStore` names them) that
    hold no store: found by the open itself, on its first connection, which then creates nothing (SQLite's missing
    file is found before, by `missing_store`). A mistyped database or schema name ends here too: hence "check"."""
    return f"no Chronicle store in {where}; {pasteable_in(ADVICE_POSTGRES[client], url)}"
