"""A PostgreSQL URL's query options are applied or refused, never dropped: `?sslmode=require` used to be read as
nothing at all, so the store was used over plaintext, and `?sslmode=bogus` or `?foo=bar` were accepted silently.
(Applied to real connections: tests/integration/test_pg_url_options.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from chronicle.runtime.config import ConfigError, eventsourcing_env
from chronicle.runtime.pg_options import ACCEPTED, libpq_options, login

BASE = "postgresql://postgres@127.0.0.1:5432/x"


def test_the_libpq_options_of_a_url_are_kept_for_every_login():
    url = f"{BASE}?schema=team&sslmode=verify-full&sslrootcert=/etc/ca.pem&application_name=ops"
    assert libpq_options(url) == {"sslmode": "verify-full", "sslrootcert": "/etc/ca.pem", "application_name": "ops"}
    assert login(url)["sslmode"] == "verify-full" and login(url)["dbname"] == "x"
    assert eventsourcing_env(url)["POSTGRES_SCHEMA"] == "team"


@pytest.mark.parametrize("query", ["foo=bar", "sslmode=require&foo=bar&zed=1"])
def test_an_option_chronicle_does_not_apply_is_refused_naming_it_and_the_accepted_ones(query):
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(f"{BASE}?{query}")
    message = str(refused.value)
    named = sorted(part.split("=")[0] for part in query.split("&") if not part.startswith("sslmode"))
    assert f"option(s) Chronicle does not apply: {', '.join(named)};" in message
    assert f"it takes {', '.join(ACCEPTED)}" in message and "PGSSLMODE" in message


@pytest.mark.parametrize(("query", "words"), [
    ("sslmode=bogus", "?sslmode= takes one of disable, allow, prefer, require, verify-ca, verify-full"),
    ("sslmode=", "?sslmode= has no value"),
    ("schema=", "?schema= has no value"),
    ("sslmode=require&sslmode=disable", "gives ?sslmode= twice"),
    ("gssencmode=always", "?gssencmode= takes one of disable, prefer, require"),
])
def test_a_value_libpq_would_refuse_or_ignore_is_a_usage_error(query, words):
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(f"{BASE}?{query}")
    assert words in str(refused.value)


@pytest.mark.parametrize("query", ["password=hunter2secret", "sslpassword=hunter2secret", "schema=&password=hunter2secret"])
def test_a_secret_in_the_query_is_never_echoed(query):
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(f"postgresql://postgres@127.0.0.1/?{query}")  # no database name either: the options come first
    assert "hunter2secret" not in str(refused.value)


def test_only_pg_options_calls_psycopg_connect():
    """Every connection Chronicle makes logs in with the URL's options: the store's pool gets them at open, and
    every other connection is made by `pg_options.connect`. A `psycopg.connect(` elsewhere would miss them."""
    root = Path(__file__).resolve().parents[2]
    calls = [str(path.relative_to(root)) for folder in ("runtime", "projections", "domain", "chronicle")
             for path in (root / folder).rglob("*.py") if "psycopg.connect(" in path.read_text(encoding="utf-8")]
    assert calls == ["runtime/pg_options.py"]
