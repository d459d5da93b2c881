"""A PostgreSQL URL's query options, applied to every connection Chronicle makes, or refused.

Only `?schema=` used to be read: `?sslmode=require` was dropped without a word and the store was used over
a plaintext connection, `?sslmode=bogus` and `?foo=bar` were accepted. Now an option is either one libpq
takes that Chronicle passes on, checked here and sent with every login (the store's pool, and the few
connections of their own that some reads, the LISTEN of a running turn and `forget`'s VACUUM open,
all through `connect` below), or the URL is refused naming it. libpq's PG* variables (PGSSLMODE,
PGSSLROOTCERT, …) still apply to every connection as libpq reads them; an option in the URL wins over one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from .config import ConfigError

#: Options whose values libpq takes from a fixed set: checked here, so that a typo is a usage error
#: rather than a connection that fails later (or, for a value libpq ignored, one that is not what was asked).
CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "sslsni": ("0", "1"),
}
#: Options passed to libpq as written (file paths, a name shown in pg_stat_activity).
FREE = ("sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir", "application_name")
#: Every libpq option a URL may carry; `schema` is Chronicle's own (config.eventsourcing_env).
LIBPQ_OPTIONS = (*CHOICES, *FREE)
ACCEPTED = ("schema", *LIBPQ_OPTIONS)
#: Where an option Chronicle refuses can be set instead, when there is such a place.
INSTEAD = {
    "connect_timeout": "CHRONICLE_PG_CONNECT_TIMEOUT sets it",
    "password": "a password goes before the host (postgresql://user:PASSWORD@host/db) or in PGPASSWORD / ~/.pgpass",
    "sslpassword": "use a key file without a passphrase, or PGSSLKEY with one libpq can read",
}


def url_options(query: str) -> dict[str, str]:
    """The URL's options by name, checked: ConfigError (a usage error) for an option Chronicle does not
    apply, a value libpq would refuse, an empty one, or one given twice. Values are never echoed, only
    names and the values allowed: a query may hold a secret (`password=`)."""
    pairs = parse_qsl(query, keep_blank_values=True)
    unknown = sorted({name for name, _ in pairs if name not in ACCEPTED})
    if unknown:
        hints = "; ".join(f"{name}: {INSTEAD[name]}" for name in unknown if name in INSTEAD)
        raise ConfigError(f"the PostgreSQL URL has option(s) Chronicle does not apply: {', '.join(unknown)}"
                          f"{' (' + hints + ')' if hints else ''}; it takes {', '.join(ACCEPTED)} "
                          "(libpq also reads PGSSLMODE and the other PG* variables from the environment)")
    options: dict[str, str] = {}
    for name, value in pairs:
        if name in options:
            raise ConfigError(f"the PostgreSQL URL gives ?{name}= twice; give it once")
        if not value.strip():
            raise ConfigError(f"the PostgreSQL URL's ?{name}= has no value; give one or leave the option out")
        if name in CHOICES and value not in CHOICES[name]:
            raise ConfigError(f"the PostgreSQL URL's ?{name}= takes one of {', '.join(CHOICES[name])}")
        options[name] = value
    return options


def libpq_options(url: str) -> dict[str, str]:
    """The libpq options of a PostgreSQL URL (checked), as keyword arguments of a psycopg connection."""
    from urllib.parse import urlsplit

    return {name: value for name, value in url_options(urlsplit(url).query).items() if name in LIBPQ_OPTIONS}


def login(url: str) -> dict[str, Any]:
    """Keyword arguments for `connect` that log in as the store's pool does: the same database, role,
    password, timeout and URL options."""
    from .config import eventsourcing_env

    env = eventsourcing_env(url)
    return {
        "dbname": env["POSTGRES_DBNAME"], "host": env["POSTGRES_HOST"], "port": env["POSTGRES_PORT"],
        "user": env["POSTGRES_USER"], "password": env["POSTGRES_PASSWORD"] or None,
        "connect_timeout": max(1, int(float(env["POSTGRES_CONNECT_TIMEOUT"]))), **libpq_options(url),
    }


def pool_login(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The login of the store's pool (`PostgresDatastore.pool.kwargs`, our options added at open), for a
    direct attempt that must be refused or let in as the pool's are: its `options` and URL options included."""
    keys = ("dbname", "host", "port", "user", "options", *LIBPQ_OPTIONS)
    return {**{key: kwargs[key] for key in keys if key in kwargs}, "password": kwargs.get("password") or None}


def connect(kwargs: dict[str, Any], **extra: Any) -> Any:
    """A psycopg connection with `kwargs` (`login(url)` or `pool_login(...)`) and `extra` over them. The only
    place outside tests that calls psycopg.connect: a connection made elsewhere would miss the URL's options."""
    import psycopg

    return psycopg.connect(**{**kwargs, **extra})
