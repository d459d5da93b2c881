"""Re-compute the hash chain and name the first link that no longer holds.

Each link is checked on its own against the stored digest of the link before it (seq - 1), so
the whole log and one session tree are verified by the same code: the whole log walks every
link, a session walks only its own. Finding the first break, not every break, is the contract:
one tampered row usually breaks everything after it in some reader, and the first is the cause.

What each kind means:
- edited: the row at a link's position is the event the link names, but its topic/state (or the
  stored digest) no longer hashes to the link; the next link tells which of the two changed.
- missing: a link names an event that is nowhere in the log, or links are gone (a gap in seq).
- reordered: the event a link names is in the log, but at another position.
- inserted: an event at or after the first chained position that no link vouches for.
- rewritten: an anchor's link no longer has the anchored digest (the chain was recomputed).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence
from uuid import UUID

from .chain import GENESIS, Link, link_digest
from .chain_reader import LogReader, RawEvent, topic_names
from .snapshot_check import check_snapshots

_BATCH = 2000


@dataclass(frozen=True)
class Break:
    kind: str
    position: int
    aggregate: str
    aggregate_id: str
    event: str
    version: int | None
    detail: str
    seq: int | None = None

    def line(self) -> str:
        if self.kind == "snapshot":  # snapshots have no position in the log
            return f"broken snapshot of {self.aggregate_id[:8]} at version {self.version}: {self.detail}"
        what = f"{self.aggregate} {self.aggregate_id[:8]} {self.event}"
        version = f" v{self.version}" if self.version is not None else ""
        return f"broken at position {self.position} ({what}{version}): {self.kind}: {self.detail}"


@dataclass
class Verdict:
    scope: str
    events: int = 0
    chained: int = 0
    unchained: int = 0
    unchained_before: int | None = None
    head: dict[str, Any] | None = None
    anchor: dict[str, Any] | None = None
    #: Snapshots found equal to their events (runtime/snapshot_check.py); whole-log verification only.
    snapshots: int = 0
    #: Of `events`, those a fork in the session's tree inherits from the session it was forked from.
    inherited: int = 0
    #: The sessions those inherited events were recorded in, and which of them this store does not hold
    #: (a fork imported from a bundle brings the turns it inherits, not the session it was forked from).
    inherited_from: list[str] = field(default_factory=list)
    origins_not_here: list[str] = field(default_factory=list)
    broken: Break | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.broken is None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data.pop("notes")
        return data

    def line(self) -> str:
        if self.broken is not None:
            return self.broken.line()
        scope = "the whole log" if self.scope == "all" else f"session tree {self.scope[:8]}"
        parts = [f"verified {scope}: {self.chained} events chained"]
        if self.inherited:
            origins = ", ".join(f"{o} (not in this store)" if o in self.origins_not_here else o for o in self.inherited_from)
            parts.append(f"{self.inherited} of its events are inherited from the session it was forked from"
                         + (f": {origins}" if origins else ""))
        if self.unchained:
            parts.append(f"{self.unchained} unchained before position {self.unchained_before} (written before the hash chain)")
        if self.snapshots:
            parts.append(f"{self.snapshots} snapshots match their events")
        if self.anchor:
            parts.append(f"anchor {self.anchor['position']} holds")
        parts.append(f"head {self.head['position']}:{self.head['digest']}" if self.head else "no head yet")
        return "; ".join(parts)


def head_of(link: Link | None) -> dict[str, Any] | None:
    return None if link is None else {"seq": link.seq, "position": link.position, "digest": link.digest.hex()}


class Verifier:
    def __init__(self, store: Any) -> None:
        self.reader = LogReader(store)

    # -- entry points --------------------------------------------------------------------------

    def verify_all(self, anchor: dict[str, Any] | None = None) -> Verdict:
        verdict = Verdict(scope="all", events=self.reader.count_events())
        first, head = self.reader.first(), self.reader.head()
        verdict.head = head_of(head)
        breaks: list[Break] = []
        if first is not None and first.seq != 1:
            breaks.append(self._gone_links(first, 1))
        seq = 0
        while not breaks:
            batch = self.reader.links_after(seq, _BATCH)
            if not batch:
                break
            found = self._check_links(batch, verdict)
            if found:
                breaks.append(found)
            seq = batch[-1].seq
        unlinked = self.reader.unlinked_positions()
        self._count_unlinked(verdict, unlinked, first, breaks)
        self._check_anchor(verdict, anchor, head, breaks)
        verdict.broken = min(breaks, key=lambda b: b.position) if breaks else None
        if verdict.broken is None:  # snapshots are compared with the events once those are proven
            verdict.snapshots, problem = check_snapshots(self.reader.store)
            if problem is not None:
                verdict.broken = Break("snapshot", 0, "Snapshot", str(problem.aggregate_id), "Snapshot", problem.version,
                                       problem.detail)
        return verdict

    def verify_session(self, session_id: UUID, anchor: dict[str, Any] | None = None, scope: Any = None) -> Verdict:
        """The links of every event the session's conversation is read from: its tree's, the turns
        a fork inherits and the attachments (runtime/session_scope.py, what `export` writes, plus
        the sessions' leases); the whole log's if that no longer loads (then `notes` says why).
        `scope`: the session's `session_scope` when the caller has read it already (`export`).

        Which aggregates those are is read from the events themselves, so a deleted or edited row
        can make the tree unloadable; the whole log still names the broken link."""
        from .session_scope import session_scope

        try:
            scope = scope if scope is not None else session_scope(self.reader.store, session_id)
            ids = scope_ids(self.reader.store, scope)
        except Exception as exc:  # noqa: BLE001 - any decoding or version error of a tampered row
            verdict = self.verify_all(anchor)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            verdict.notes.append(f"session {session_id} does not load ({type(exc).__name__}: {first}); verified the whole log")
            return verdict
        verdict = self.verify_aggregates(str(session_id), ids, anchor, scope.inherited)
        verdict.inherited_from = [str(origin) for origin in scope.inherited_from]
        verdict.origins_not_here = [str(origin) for origin in scope.inherited_from if not self._holds_session(origin)]
        return verdict

    def _holds_session(self, session_id: UUID) -> bool:
        from .store import NotFound

        try:
            self.reader.store.session(session_id, copy=False)
        except NotFound:
            return False
        return True

    def verify_aggregates(self, scope: str, originator_ids: Sequence[UUID], anchor: dict[str, Any] | None = None,
                          inherited: Sequence[UUID] = ()) -> Verdict:
        verdict = Verdict(scope=scope)
        first, head = self.reader.first(), self.reader.head()
        verdict.head = head_of(head)
        breaks: list[Break] = []
        links = self.reader.links_of(originator_ids)
        for start in range(0, len(links), _BATCH):
            found = self._check_links(links[start:start + _BATCH], verdict)
            if found:
                breaks.append(found)
                break
        events = self.reader.events_of(originator_ids)
        verdict.events = len(events)
        inherited_ids = set(inherited)
        verdict.inherited = sum(1 for e in events if e.originator_id in inherited_ids)
        linked_positions = {k.position for k in links}
        unlinked = [e for e in events if e.position not in linked_positions]
        # An event of this tree at a position whose link names an aggregate outside it was moved there.
        foreign = self.reader.links_at(e.position for e in unlinked)
        moved = [self._misplaced(foreign[e.position], e) for e in unlinked if e.position in foreign]
        breaks += moved[:1]
        self._count_unlinked(verdict, [e.position for e in unlinked if e.position not in foreign], first, breaks)
        gap = self._version_gap(events, links)
        if gap:
            breaks.append(gap)
        self._check_anchor(verdict, anchor, head, breaks)
        verdict.broken = min(breaks, key=lambda b: b.position) if breaks else None
        return verdict

    # -- checks --------------------------------------------------------------------------------

    def _check_links(self, batch: list[Link], verdict: Verdict) -> Break | None:
        events = self.reader.events_at(k.position for k in batch)
        known = {k.seq: k for k in batch}
        known.update(self.reader.links_by_seq(k.seq - 1 for k in batch if k.seq - 1 not in known and k.seq > 1))
        for link in batch:
            found = self._check_link(link, known, events)
            if found:
                return found
            verdict.chained += 1
        return None

    def _check_link(self, link: Link, known: dict[int, Link], events: dict[int, RawEvent]) -> Break | None:
        if link.seq == 1:
            prev = GENESIS
        elif link.seq - 1 in known:
            prev = known[link.seq - 1].digest
        else:
            return self._gone_links(link, link.seq - 1)
        event = events.get(link.position)
        if event is None or (event.originator_id, event.version) != (link.originator_id, link.version):
            return self._misplaced(link, event)
        digest = link_digest(prev, link.seq, link.position, event.originator_id, event.version, event.topic, event.state)
        if digest == link.digest:
            return None
        return self._break("edited", link, event, self._what_changed(link, digest))

    def _what_changed(self, link: Link, recomputed: bytes) -> str:
        """The next link was made from the true digest of this one: it tells content from digest edits."""
        nxt = self.reader.links_by_seq([link.seq + 1]).get(link.seq + 1)
        event = self.reader.events_at([nxt.position]).get(nxt.position) if nxt else None
        if nxt is None or event is None:
            return "its content or its digest changed since it was recorded (the head link; nothing after it to tell which)"

        def next_digest(prev: bytes) -> bytes:
            assert nxt is not None and event is not None
            return link_digest(prev, nxt.seq, nxt.position, event.originator_id, event.version, event.topic, event.state)

        if next_digest(recomputed) == nxt.digest:
            return "its stored digest was changed; the content still matches the chain"
        if next_digest(link.digest) == nxt.digest:
            return "its content (topic or state) changed since it was recorded"
        return "its content and digest changed since it was recorded"

    def _misplaced(self, link: Link, there: RawEvent | None) -> Break:
        named = self.reader.find_event(link.originator_id, link.version)
        holds = f"; position {link.position} now holds {there.aggregate} {str(there.originator_id)[:8]} v{there.version}" if there else ""
        if named is not None:
            return self._break("reordered", link, named,
                               f"the chain has it at position {link.position}, the log at position {named.position}{holds}")
        if there is not None:
            return self._break("edited", link, None, f"the event the chain names is gone{holds}")
        return self._break("missing", link, None, "the event the chain names at this position was deleted")

    def _gone_links(self, link: Link, missing_seq: int) -> Break:
        return self._break("missing", link, None, f"the chain link before it (seq {missing_seq}) is gone: an event and its link were deleted")

    def _break(self, kind: str, link: Link, event: RawEvent | None, detail: str) -> Break:
        if event is not None:
            aggregate, name = event.aggregate, event.event
        else:
            topic = self.reader.any_topic(link.originator_id)
            aggregate, name = (topic_names(topic)[0], "?") if topic else ("?", "?")
        return Break(kind, link.position, aggregate, str(link.originator_id), name, link.version, detail, link.seq)

    def _count_unlinked(self, verdict: Verdict, unlinked: list[int], first: Link | None, breaks: list[Break]) -> None:
        boundary = first.position if first is not None else None
        before = [p for p in unlinked if boundary is None or p < boundary]
        after = [p for p in unlinked if boundary is not None and p > boundary]
        verdict.unchained = len(before)
        if before:
            verdict.unchained_before = boundary if boundary is not None else before[-1] + 1
        if after:
            event = self.reader.events_at([after[0]])[after[0]]
            breaks.append(Break("inserted", event.position, event.aggregate, str(event.originator_id), event.event,
                                event.version, "no chain link vouches for this event: it was added outside Chronicle"))

    def _version_gap(self, events: list[RawEvent], links: list[Link]) -> Break | None:
        """A session's event deleted with its link leaves a hole in its aggregate's versions."""
        versions: dict[UUID, set[int]] = {}
        for oid_version in [(e.originator_id, e.version) for e in events] + [(k.originator_id, k.version) for k in links]:
            versions.setdefault(oid_version[0], set()).add(oid_version[1])
        for oid, seen in versions.items():
            hole = next((v for v in range(1, max(seen) + 1) if v not in seen), None)
            if hole is None:
                continue
            later = [e.position for e in events if e.originator_id == oid and e.version > hole]
            topic = self.reader.any_topic(oid)
            return Break("missing", later[0] if later else 0, topic_names(topic)[0] if topic else "?", str(oid), "?", hole,
                         f"version {hole} of this aggregate is gone, event and link both")
        return None

    def _check_anchor(self, verdict: Verdict, anchor: dict[str, Any] | None, head: Link | None, breaks: list[Break]) -> None:
        if anchor is None:
            return
        verdict.anchor = anchor
        seq, digest = int(anchor["seq"]), str(anchor["digest"])
        link = self.reader.links_by_seq([seq]).get(seq)
        if link is None:
            end = f"the chain ends at seq {head.seq}" if head else "the chain is empty"
            breaks.append(Break("missing", int(anchor["position"]), "?", "?", "?", None,
                                f"the anchored link (seq {seq}) is gone; {end}: links were deleted from the end", seq))
        elif link.digest.hex() != digest or link.position != int(anchor["position"]):
            breaks.append(Break("rewritten", link.position, "?", str(link.originator_id), "?", link.version,
                                f"link seq {seq} no longer has the anchored digest {digest[:16]}…: the chain was recomputed", seq))


def write_anchor(path: Path, verdict: Verdict, when: str) -> dict[str, Any]:
    if verdict.head is None:
        raise ValueError("the chain is empty: nothing to anchor yet")
    anchor = {**verdict.head, "anchored_at": when, "events": verdict.events}
    path.write_text(json.dumps(anchor, indent=2) + "\n")
    return anchor


def read_anchor(path: Path) -> dict[str, Any]:
    try:
        anchor = json.loads(path.read_text())
        int(anchor["seq"]), int(anchor["position"]), bytes.fromhex(anchor["digest"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not an anchor file written by `chronicle verify --anchor`: {exc}") from None
    return dict(anchor)


def session_tree_ids(store: Any, root_id: UUID, leases: bool = True) -> list[UUID]:
    """Every aggregate the session's conversation is read from (`scope_ids` of its `session_scope`)."""
    from .session_scope import session_scope

    return scope_ids(store, session_scope(store, root_id), leases)


def scope_ids(store: Any, scope: Any, leases: bool = True) -> list[UUID]:
    """A session scope's aggregates: its tree's sessions, turns and tool calls (and leases), the
    turns and tool calls a fork among them inherits, and the attachments (runtime/session_scope.py)."""
    from chronicle.domain.ids import lease_id

    from .session_scope import attachment_ids

    ids = [*scope.own, *([lease_id(s) for s in scope.sessions] if leases else []), *scope.inherited]
    ids += attachment_ids(store, [*scope.own, *scope.inherited])
    return list(dict.fromkeys(ids))
