"""A reader's checkpoint of an index only moves up, on both backends: a reader that did not see a higher
checkpoint written meanwhile collides instead of writing a lower one after it, and learns the higher one."""

from __future__ import annotations

from uuid import uuid4

from chronicle.runtime.index_checkpoints import Checkpoint
from chronicle.runtime.store import ChronicleStore


def test_a_stale_reader_never_writes_a_lower_checkpoint_after_a_higher_one(db_url):
    index = uuid4()
    fast, slow = ChronicleStore(db_url), ChronicleStore(db_url)
    ahead, behind = Checkpoint(fast, index, "outbox", ""), Checkpoint(slow, index, "outbox", "")
    assert ahead.read() is None and behind.read() is None, "none yet: read the index from its start"
    assert ahead.advance(5) and not ahead.advance(5) and not ahead.advance(3)
    assert not behind.advance(3), "its slot was taken by the higher one"
    assert behind.position == 5 and not behind.advance(4)
    assert behind.advance(7) and ahead.advance(6) is False
    restarted = ChronicleStore(db_url)
    assert Checkpoint(restarted, index, "outbox", "").read() == 7
    assert Checkpoint(fast, index, "outbox", "elsewhere").read() is None, "each scope has its own"
    assert Checkpoint(fast, index, "notices", "").read() is None, "and each reader"
