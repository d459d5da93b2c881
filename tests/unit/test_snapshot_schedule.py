"""A Turn's snapshots come on a growing schedule: cost in proportion to the turn, loads bounded."""

from __future__ import annotations

from itertools import pairwise

from chronicle.runtime.snapshot_schedule import due_at_end, last_scheduled, on_schedule


def test_the_schedule_doubles_by_halves_and_names_its_newest_entry_for_any_version():
    due = [v for v in range(1, 5001) if on_schedule(v, 100)]
    assert due == [100, 200, 300, 400, 600, 800, 1200, 1600, 2400, 3200, 4800]
    assert all(b <= a * 1.5 for a, b in pairwise(due[1:]))  # after the first two, never more than half again
    for version in range(0, 5001):
        assert last_scheduled(version, 100) == max([v for v in due if v <= version], default=0), version


def test_what_a_load_replays_past_the_newest_snapshot_is_at_most_a_third_of_the_turn():
    for version in range(100, 20001):
        assert version - last_scheduled(version, 100) <= max(99, version // 3), version


def test_a_turn_ending_far_from_its_last_snapshot_takes_one():
    assert not due_at_end(99, 100) and not due_at_end(450, 100) and not due_at_end(1650, 100)
    assert due_at_end(523, 100) and due_at_end(2399, 100) and due_at_end(700, 100)
