"""Import's re-check of a bundle's events against the digests they had in the source store's chain.

Why: an import writes every event with new links of the target's chain, so a bundle carrying a row
edited in the source before the export would come out of the target verified, the edit laundered.
`export` refuses a broken chain (runtime/app/bundles.py); a bundle written by older code, which did
not, is caught here where the bundle allows it. A bundle carries, per event, its position in the
source log and its source link's digest (`log_digest`), but not the link's seq, and a link's digest is

    sha256(domain | previous link's digest | seq | position | aggregate | version | topic | state)

(runtime/chain.py). So an event can be re-hashed only when the event just before it in the source
log (position - 1) is the bundle's previous event: there is one chain over the whole log, appended in
position order, so their links are consecutive and the previous digest is that event's `log_digest`.
Its seq is position - offset, where the offset (positions with no link before it: an unchained prefix,
ids that rolled-back inserts used) never decreases along the log and is at most the source head's
(position - seq), which the manifest holds. The offset is searched for, downward from the head's for
the first event checked, then upward from the last one found, so an honest bundle costs about one
extra hash per event. An offset that matches proves the event is as the source chain recorded it;
none matching in the whole range proves it is not, and the import is refused. Sound, not complete:
an event after a row the bundle does not carry (a lease, an index entry, another session's event) is
not re-checked, nor one not matched within SEARCH_LIMIT offsets of a wider range; most of a session's events are saved
in runs (a step's turn, tool call and session events together), so most are.
"""

from __future__ import annotations

from typing import Any, Sequence

from .chain import link_digest
from .chain_reader import RawEvent

#: The most offsets tried for one event: a store with a long unchained prefix before its chain began
#: may have a range of millions, which would cost seconds of hashing; an event not matched within this
#: many of a wider range goes unchecked (no proof either way).
SEARCH_LIMIT = 65_536


class SourceMismatch(ValueError):
    """A bundle event that is not what the source store's chain recorded."""


def check_source_digests(manifest: dict[str, Any], entries: Sequence[dict[str, Any]], events: Sequence[RawEvent]) -> int:
    """How many of the bundle's events were re-checked against their source digests; SourceMismatch naming
    the first that does not match."""
    head = (manifest.get("source") or {}).get("head") or {}
    try:
        top = int(head["position"]) - int(head["seq"])
    except (KeyError, TypeError, ValueError):
        return 0  # a source with no chain yet: nothing to check against
    low: int | None = None  # the offset found last: the next event's is no lower
    checked = 0
    for i in range(1, len(events)):
        before, event = events[i - 1], events[i]
        prev_hex, digest_hex = entries[i - 1].get("log_digest"), entries[i].get("log_digest")
        if before.position != event.position - 1 or not prev_hex or not digest_hex:
            continue
        offsets = range(top, -1, -1) if low is None else range(low, top + 1)
        prev, digest = bytes.fromhex(str(prev_hex)), bytes.fromhex(str(digest_hex))
        found = next((o for o in offsets[:SEARCH_LIMIT] if _digest(prev, event.position - o, event) == digest), None)
        if found is None and len(offsets) > SEARCH_LIMIT:
            continue  # not found among the offsets tried, others left untried: no proof either way
        if found is None:
            raise SourceMismatch(f"bundle event {i + 1} (position {event.position}, {event.aggregate} {event.event} "
                                 f"v{event.version}) does not match the digest the bundle records for it from the source store's "
                                 "chain (its log_digest): the event or that digest was changed, in the bundle after the export or "
                                 "in the source store before it (`chronicle verify` on the source store says whether it was)")
        low = found
        checked += 1
    return checked


def _digest(prev: bytes, seq: int, event: RawEvent) -> bytes:
    return link_digest(prev, seq, event.position, event.originator_id, event.version, event.topic, event.state)
