"""A session id as typed is an argument: unknown or ambiguous exits 2 (a usage error) in every
command that takes one, and an ambiguous prefix lists the sessions it matches."""

from __future__ import annotations

from uuid import UUID

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import open_store_at
from tests.helpers import cli

TWINS = (UUID("abcd0000-0000-4000-8000-000000000001"), UUID("abcd0000-0000-4000-8000-000000000002"))

COMMANDS = (
    ("history",), ("log",), ("cost",), ("undo",), ("fork", "{sid}", "--at", "1"), ("replay",), ("resume",),
    ("approve",), ("steer", "{sid}", "more"), ("audit", "--session"), ("run", "hello", "--session"),
)


def _args(command: tuple[str, ...], sid: str) -> list[str]:
    if "{sid}" in command:
        return [a.replace("{sid}", sid) for a in command]
    return [*command, sid]


@pytest.fixture
def twins(db_url):
    store = open_store_at(db_url)
    for sid in TWINS:
        start_session(store, AgentSpec(name="main"), None, session_id=sid)
    store.close()
    return db_url


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_unknown_session_prefix_is_a_usage_error_everywhere(twins, command):
    result = cli(*_args(command, "ffff"), db=twins)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "no session matches 'ffff'" in result.stderr and "Traceback" not in result.stderr


def test_an_ambiguous_prefix_is_a_usage_error_that_lists_the_candidates(twins):
    result = cli("history", "abcd", db=twins)
    assert result.returncode == 2
    assert "matches 2 sessions" in result.stderr
    assert str(TWINS[0]) in result.stderr and str(TWINS[1]) in result.stderr


def test_a_full_id_that_names_no_session_is_a_usage_error_and_a_unique_prefix_still_works(twins):
    missing = cli("history", "abcd0000-0000-4000-8000-000000000009", db=twins)
    assert missing.returncode == 2 and "no session abcd0000-0000-4000-8000-000000000009" in missing.stderr
    found = cli("history", "abcd0000-0000-4000-8000-000000000002", "--json", db=twins)
    assert found.returncode == 0, found.stderr
    assert cli("history", str(TWINS[0])[:-1] + "1", "--json", db=twins).returncode == 0



def test_the_sessions_table_shows_short_unique_ids_that_resolve_and_keeps_status_at_80_columns(twins):
    store = open_store_at(twins)
    lone = UUID("12345678-0000-4000-8000-000000000000")
    start_session(store, AgentSpec(name="main"), None, session_id=lone)
    store.close()
    table = cli("sessions", db=twins, env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert "status" in header and all(len(line) <= 80 for line in table.stdout.splitlines())
    shown = sorted(row.split()[0] for row in rows)
    assert shown == ["12345678", str(TWINS[0]), str(TWINS[1])]  # the twins differ only in their last character
    assert cli("history", "12345678", "--json", db=twins).returncode == 0


def test_a_unique_prefix_is_found_by_a_range_of_ids_not_by_reading_the_session_index(twins, monkeypatch):
    """Every command given a prefix resolves it: reading the whole index grew with the store (30 ms at 3,000
    sessions). A prefix matching one session is a range scan; matching several, the index still decides."""
    store = open_store_at(twins)
    lone = UUID("12345678-9abc-4000-8000-000000000000")
    start_session(store, AgentSpec(name="main"), None, session_id=lone)
    store.close()
    cold = open_store_at(twins)
    with monkeypatch.context() as index:
        index.setattr(cold, "session_ids", lambda: pytest.fail("the session index was read"))
        assert cold.resolve_session_id("12345678-9A") == lone
        assert cold.resolve_session_id("1234") == lone
    with pytest.raises(Exception, match="matches 2 sessions"):
        cold.resolve_session_id("abcd0000-0000-4000-8000-00000000000")
    with pytest.raises(Exception, match="no session matches '12345678-9abd'"):
        cold.resolve_session_id("12345678-9abd")
    cold.close()
