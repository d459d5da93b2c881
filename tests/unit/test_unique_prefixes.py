"""Short ids in tables are git-style: the shortest prefix (8 characters at least) no other id shares."""

from __future__ import annotations

from chronicle.runtime.cli.tables import unique_prefixes


def test_ids_are_cut_to_eight_characters_unless_a_neighbour_shares_more():
    ids = ["abcdef01-1111", "abcdef01-2222", "12345678-9999"]
    short = unique_prefixes(ids)
    assert short["12345678-9999"] == "12345678"
    assert short["abcdef01-1111"] == "abcdef01-1" and short["abcdef01-2222"] == "abcdef01-2"
    assert all(sum(other.startswith(s) for other in ids) == 1 for s in short.values())
