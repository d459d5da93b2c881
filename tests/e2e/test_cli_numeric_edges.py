"""Numeric edge values typed at the CLI: infinities, NaN, negatives and huge numbers are refused on
one line with exit 2, or clamped to what they mean; never a traceback or a worker looping on them."""

from __future__ import annotations

import pytest

from tests.helpers import cli, json_lines, response, text, write_script


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "-inf", "0.1"])
def test_worker_refuses_a_lease_that_is_not_a_finite_number_of_seconds(sqlite_url, value):
    result = cli("worker", "--once", f"--lease-s={value}", db=sqlite_url, timeout=30)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--lease-s takes a finite number" in lines[0], result.stderr


@pytest.mark.parametrize("args", [("worker", "--once", "--poll=nan"), ("worker", "--once", "--idle-exit=inf"),
                                  ("resume", "--all", "--lease-s=inf"), ("repairs", "--stuck-after=nan")])
def test_other_seconds_flags_refuse_inf_and_nan_the_same_way(sqlite_url, args):
    result = cli(*args, db=sqlite_url, timeout=30)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and "takes a finite number" in result.stderr


def test_audit_takes_a_huge_limit_as_all_and_refuses_an_age_before_year_one(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    ran = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert ran.returncode == 0, ran.stderr
    everything = json_lines(cli("audit", "--json", db=db_url).stdout)
    huge = cli("audit", "--json", "--limit", "99999999999999999999", db=db_url)
    assert huge.returncode == 0, huge.stderr
    assert json_lines(huge.stdout) == everything and everything
    assert json_lines(cli("audit", "--json", "--last", "99999999999999999999", db=db_url).stdout) == everything
    not_int = cli("audit", "--limit", "1e20", db=db_url)
    assert not_int.returncode == 2 and "Traceback" not in not_int.stderr
    ancient = cli("audit", "--since", "99999999d", db=db_url)
    assert ancient.returncode == 2 and "year 1" in ancient.stderr and "Traceback" not in ancient.stderr


def test_audit_last_gives_the_newest_entries_in_commit_order_from_the_cli_the_library_and_the_server(db_url, workspace, tmp_path):
    from chronicle import Chronicle
    from tests.server.serving import serving

    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    sid = json_lines(cli("run", "one", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                         db=db_url).stdout)[0]["session_id"]
    assert cli("run", "two", "--session", sid, db=db_url).returncode == 0
    everything = json_lines(cli("audit", "--json", db=db_url).stdout)
    newest = json_lines(cli("audit", "--json", "--last", "3", db=db_url).stdout)
    assert newest == everything[-3:] and [e["position"] for e in newest] == sorted(e["position"] for e in newest)
    assert json_lines(cli("audit", "--json", "--limit", "3", db=db_url).stdout) == everything[:3]
    both = cli("audit", "--limit", "2", "--last", "2", db=db_url)
    assert both.returncode == 2 and "not both" in both.stderr
    with Chronicle(db_url) as app:
        two = app.audit(session=sid, last=2)
    assert two == [e for e in everything if e["session_id"] == sid][-2:]
    with serving(db_url, workspace) as base:
        import httpx

        assert httpx.get(f"{base}/sessions/{sid}/audit", params={"last": 2}).json() == two


HUGE = "99999999999999999999999"  # beyond the 64-bit integers both stores hold


def test_a_number_beyond_what_the_store_holds_is_a_usage_error_naming_the_range_everywhere(db_url, workspace, tmp_path):
    """It reached SQL: an OverflowError said as an internal error, or a "datatype mismatch" said as the store being
    unavailable (HTTP 503, an outage to monitoring)."""
    from chronicle import Chronicle, ChronicleError
    from tests.server.serving import serving

    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    sid = json_lines(cli("run", "one", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                         db=db_url).stdout)[0]["session_id"]
    for args in (("history", sid, "--at", HUGE), ("history", sid, "--version", HUGE), ("history", sid, "--at", "1", "--step", HUGE),
                 ("notes", sid, "--at", HUGE), ("why", sid, "--turn", HUGE), ("fork", sid, "--at", HUGE),
                 ("undo", sid, "--turns", HUGE)):
        result = cli(*args, db=db_url)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "9223372036854775807" in result.stderr and "internal error" not in result.stderr, (args, result.stderr)
    with Chronicle(db_url) as app:
        for call in (lambda: app.history(sid, at=int(HUGE)), lambda: app.history(sid, at=1, step=int(HUGE)),
                     lambda: app.notes(sid, at=int(HUGE)), lambda: app.why(sid, turn=int(HUGE))):
            with pytest.raises(ChronicleError) as refused:
                call()
            assert refused.value.code == 2 and "9223372036854775807" in str(refused.value)
        assert app.audit(session=sid, limit=int(HUGE)) == app.audit(session=sid)  # a huge limit still means all
    with serving(db_url, workspace) as base:
        import httpx

        for path, params in ((f"/sessions/{sid}/history", {"at": HUGE}), (f"/sessions/{sid}/history", {"at": 1, "step": HUGE}),
                             (f"/sessions/{sid}/history", {"version": HUGE}), (f"/sessions/{sid}/notes", {"at": HUGE}),
                             (f"/sessions/{sid}/why", {"turn": HUGE}), (f"/sessions/{sid}/events", {"after": HUGE, "follow": "false"})):
            answer = httpx.get(f"{base}{path}", params=params)
            assert answer.status_code in (400, 422) and answer.json()["code"] == 2, (path, params, answer.status_code, answer.text)
        assert httpx.get(f"{base}/sessions/{sid}/audit", params={"limit": HUGE}).status_code == 200


def test_help_states_each_options_own_range_not_the_bound_every_integer_shares():
    shown = cli("history", "--help", env={"COLUMNS": "200"}).stdout
    assert "[x>=1]" in shown and "[x>=0]" in shown and "9223372036854775807" not in shown
