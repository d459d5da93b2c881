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
    not_int = cli("audit", "--limit", "1e20", db=db_url)
    assert not_int.returncode == 2 and "Traceback" not in not_int.stderr
    ancient = cli("audit", "--since", "99999999d", db=db_url)
    assert ancient.returncode == 2 and "year 1" in ancient.stderr and "Traceback" not in ancient.stderr
