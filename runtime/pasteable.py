"""The `chronicle …` commands Chronicle's messages offer, written so that pasting one acts on the same store.

A hint such as "`chronicle redo 5f355ba9` puts them back" used to be written for the store a plain command
finds (CHRONICLE_DB, else the nearest `.chronicle/chronicle.db`). After `--db sqlite:///elsewhere.db` the paste
opened another store, or found none. Every hint is now built here from the URL of the store it is about: with
the root `--db` (`chronicle --db URL redo SID`, which every command takes) when a plain command would open
another store, plain otherwise. The CLI, chat, the worker, the library's errors and the server's answers
(`why`'s `saw.history`) all say it the same way, because each passes the URL of the store it has open.

A hint that is a field of an answer rather than words of a message (`why`'s `saw.history`) is data: the CLI's --json,
the library and the HTTP API return the same value for the same question, so it cannot depend on a CHRONICLE_DB the
process asking may not share (the library's caller's shell is not known). Such a field (`shell=False`) names the store
unless the default lookup from the current directory finds it, whatever CHRONICLE_DB says.
"""

from __future__ import annotations

import os
import re
import shlex
from contextvars import ContextVar
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .config import ConfigError, absolute_sqlite_url, default_db_url, sqlite_path
from .redaction import URL_PASSWORD, is_secret_name, redact_secrets

#: CHRONICLE_DB as the user's shell holds it ("" for unset), while the root `chronicle --db URL CMD` has put URL in
#: its place for the command (runtime/cli/app.py; reset when the command ends). None: no root --db, os.environ says.
SHELL_DB: ContextVar[str | None] = ContextVar("chronicle_shell_db", default=None)
#: A command quoted in a message: `chronicle ARGS`.
QUOTED = re.compile(r"`chronicle ([^`]+)`")
#: Whether a hint may name its store. `chronicle serve` turns it off (`plain_hints`): its answers reach clients on
#: other machines, to whom the server's database (host, user, file path) is neither of use nor theirs to know.
_naming = True


def plain_hints() -> None:
    """From now on this process's hints name no store: they read `chronicle ARGS`, as before there was a --db."""
    global _naming
    _naming = False


def pasteable(args: str, url: str | None, *, shell: bool = True) -> str:
    """`chronicle ARGS` as the user can paste it to act on the store at `url` (the store the hint is about;
    None when none is known: the plain command).

    No `--db` when a plain command would open that store anyway: the default lookup finds it from the
    current directory, or the shell's CHRONICLE_DB names it (a paste in that shell works). Else the root
    `--db` goes first, so that ARGS stays the command as the rest of the message describes it.

    A URL that carries a password is shown without it (`postgresql://user@host/db`), not with a mask in
    its place: libpq then takes the password from PGPASSWORD or ~/.pgpass, as it would for any URL without
    one, and where neither has it the paste fails saying so, while naming the right store. The
    alternatives fail quietly instead: a plain hint opens the default store, and `--db "$CHRONICLE_DB"`
    is printed exactly when CHRONICLE_DB does not name this store, so it would open another one (or,
    unset, the default). Query parameters named as secrets (`sslpassword`, …) are left out the same way.

    `shell=False`: a field of an answer (see the module's docstring): CHRONICLE_DB is not read, so the plain command
    stands only for the store the default lookup from the current directory finds.
    """
    if url is None or not _naming or _plain_opens(url, shell):
        return f"chronicle {args}"
    return f"chronicle --db {shlex.quote(_shown(url))} {args}"


def pasteable_in(text: str, url: str | None) -> str:
    """`text` with each `chronicle ARGS` quoted in it (between backticks) made pasteable for the store at `url`:
    for a fixed message that names commands (doctor's remedies, where there is no store to start one)."""
    return QUOTED.sub(lambda m: f"`{pasteable(m.group(1), url)}`", text)


def _plain_opens(url: str, shell: bool = True) -> bool:
    """Whether `chronicle CMD` without --db, typed in the user's shell here, opens the store at `url` (`shell=False`: typed
    where CHRONICLE_DB is unset)."""
    held = SHELL_DB.get()
    named = None if not shell else os.environ.get("CHRONICLE_DB") if held is None else held
    try:
        plain = absolute_sqlite_url(named or default_db_url())
        url = absolute_sqlite_url(url)
    except ConfigError:
        return False
    mine, theirs = sqlite_path(url), sqlite_path(plain)
    if mine is not None or theirs is not None:
        return mine is not None and theirs is not None and _same_file(mine, theirs)
    return url == plain


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _shown(url: str) -> str:
    """The URL with its password and secret-named query parameters left out; a SQLite URL as resolved (an
    absolute path: the paste works from any directory)."""
    if url.startswith("sqlite:"):
        try:
            return absolute_sqlite_url(url)
        except ConfigError:
            return url
    # The password up to the last "@" before the host, as redaction reads it: one holding "/" or "@" unencoded too.
    parts = urlsplit(URL_PASSWORD.sub(lambda m: m.group("head")[:-1] + m.group("tail"), url))
    query = parts.query
    if query:
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not is_secret_name(k)]
        query = urlencode(kept, safe="/:,")
    # Whatever else looks like a secret (a value the environment holds as one) is masked, never shown.
    return redact_secrets(urlunsplit(parts._replace(query=query)))
