"""Chronicle's ids are the standard library's name-based UUIDs, byte for byte.

`domain.ids.uuid5` builds them without `uuid.UUID`'s checks (a rebuild derives one per tool
result); ids already stored were made by `uuid.uuid5`, so any difference would orphan them.
"""

from __future__ import annotations

import pickle
import uuid

from hypothesis import given
from hypothesis import strategies as st

from chronicle.domain import ids


@given(st.uuids(), st.text())
def test_uuid5_is_the_standard_librarys(namespace, name):
    ours, theirs = ids.uuid5(namespace, name), uuid.uuid5(namespace, name)
    assert ours == theirs and hash(ours) == hash(theirs) and str(ours) == str(theirs)
    assert ours.version == 5 and ours.variant == uuid.RFC_4122 and ours.is_safe == theirs.is_safe
    assert pickle.loads(pickle.dumps(ours)) == theirs


def test_derived_ids_are_what_earlier_versions_stored():
    turn = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert ids.tool_call_id(turn, 3, "toolu_01") == uuid.uuid5(turn, "tool/3/toolu_01")
    assert str(ids.CHRONICLE_NS) == str(uuid.uuid5(uuid.NAMESPACE_URL, "https://chronicle.invalid/ids"))


@given(st.uuids(), st.uuids(), st.integers(min_value=1, max_value=36))
def test_a_prefix_bounds_exactly_the_ids_it_begins(one, other, length):
    """`prefix_bounds` turns what people type (git-style prefixes of the canonical form) into an id range, which
    the store scans instead of the whole session index: every id the prefix begins is inside, no other is."""
    prefix = str(one)[:length]
    bounds = ids.prefix_bounds(prefix)
    assert bounds is not None
    low, high = bounds
    assert low <= one <= high
    assert (low <= other <= high) == str(other).startswith(prefix)


def test_text_that_begins_no_id_has_no_bounds():
    for text in ("", "xyz", "3fA2", "3f2a1b2c3", "3f2a-", "3f2a1b2c-12345", "3f2a1b2c-1234-1234-1234-1234567890abc"):
        assert ids.prefix_bounds(text) is None, text
    assert ids.prefix_bounds("3f2a1b2c-") == (uuid.UUID("3f2a1b2c-0000-0000-0000-000000000000"),
                                             uuid.UUID("3f2a1b2c-ffff-ffff-ffff-ffffffffffff"))
