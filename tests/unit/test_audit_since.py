"""`--since` accepts ISO times (UTC when no offset) and ages, in the audit table's time format."""

from __future__ import annotations

from datetime import datetime, timezone

from chronicle.runtime.app.queries import parse_since


def test_an_iso_date_without_offset_is_read_as_utc_midnight():
    assert parse_since("2026-01-05") == "2026-01-05T00:00:00.000000Z"


def test_an_offset_is_converted_to_utc():
    assert parse_since("2026-01-05T10:30:00+02:00") == "2026-01-05T08:30:00.000000Z"


def test_an_age_counts_back_from_now():
    now = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
    assert parse_since("90m", now=now) == "2026-01-05T10:30:00.000000Z"
    assert parse_since("2d", now=now) == "2026-01-03T12:00:00.000000Z"
