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
from typing import Any, Callable, Optional, Sequence
from uuid import UUID

from .chain import GENESIS, Link, link_digest
from .chain_reader import LogReader, RawEvent, topic_names
from .pasteable import pasteable
from .snapshot_check import check_snapshots

_BATCH = 2000

#: `progress(phase, done, total)` as a check goes: phase "chain" (links checked of the links there are), then
#: "snapshots" (snapshots compared with their events). For a bar (runtime/cli/bars.py) and an interrupt's line.
Progress = Callable[[str, int, Optional[int]], None]


def _quiet(phase: str, done: int, total: Optional[int]) -> None:
    return None


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
        if self.kind == "other_store":  # nothing of this store is broken: the anchor cannot be checked here
            return f"not checked against the anchor: {self.detail}"
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
    #: Snapshots found equal to their events (runtime/snapshot_check.py): the whole log's, or the session tree's.
    snapshots: int = 0
    #: Of `events`, those a fork in the session's tree inherits from the session it was forked from.
    inherited: int = 0
    #: The sessions those inherited events were recorded in, and which of them this store does not hold
    #: (a fork imported from a bundle brings the turns it inherits, not the session it was forked from).
    inherited_from: list[str] = field(default_factory=list)
    origins_not_here: list[str] = field(default_factory=list)
    broken: Break | None = None
    #: Why the session's tree could not be read from the log, in a user's words (None: it was): which rows are
    #: its is read from its events, so it is not verified; `broken` is then the whole log's first broken link.
    unloadable: str | None = None
    #: Of `events`, those of the session tree's leases (which process ran a session when): checked here, left out of
    #: what `export` carries (a lease is this store's), so a tree's bundle holds `events - leases` of them.
    leases: int = 0
    #: The store's URL, for the commands the verdict suggests (runtime/pasteable.py); not part of the JSON.
    url: str | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None and self.unloadable is None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data.pop("url")
        return data

    def line(self) -> str:
        scope = "the whole log" if self.scope == "all" else f"session tree {self.scope[:8]}"
        if self.unloadable is not None:
            found = (f"the whole log is {self.broken.line()}" if self.broken is not None else
                     f"the whole log's {self.chained} chained events verify, so the row was changed without breaking a link "
                     "(or cannot be read by this version of Chronicle)")
            from .pasteable import pasteable

            return (f"{scope} not verified: {self.unloadable}; {found}; `{pasteable('doctor', self.url)}` lists the rows that "
                    f"do not load, `{pasteable('verify', self.url)}` checks the whole log")
        if self.broken is not None:
            return self.broken.line()
        parts = [f"verified {scope}: {self.chained} events chained"]
        if self.leases:
            parts.append(f"{self.leases} of its {self.events} events are its sessions' leases, which `export` leaves out "
                         f"(it carries {self.events - self.leases})")
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


def _first(breaks: list[Break]) -> Break | None:
    """The break a reader should see: the earliest in the log; an anchor of another store only when nothing here is broken."""
    return min(breaks, key=lambda b: (b.kind == "other_store", b.position)) if breaks else None


def _unloadable(exc: BaseException) -> str:
    """Why the tree does not load, as a reader of `verify` needs it: what is wrong with the stored rows, not
    the exception the code met (a tampered state fails in whatever decodes it, e.g. a TypeError in a domain event)."""
    from .store_errors import MissingEvents

    if isinstance(exc, MissingEvents):  # what the tree shows; why (deleted, moved) is the chain's to say
        return f"it does not load from the log ({str(exc).split(';')[0].split(' (')[0]})"
    return "it does not load from the log: one of its stored events does not decode (it was changed or damaged)"


def session_to_verify(store: Any, ref: str | UUID) -> UUID:
    """The session `ref` names (a full id or a prefix, as every command takes it), even when it does not load: every
    command loads the session it is given, so a tampered row of it (an event moved in from another session, a state
    that does not decode) stopped `verify SESSION` with the reader's error, while verifying it is how to learn why."""
    from chronicle.domain.ids import prefix_bounds

    from .store import SESSION_STARTED
    from .store_errors import UnreadableEvent
    from .store_rows import ids_in_range

    if isinstance(ref, UUID):
        return ref
    try:
        return UUID(str(store.resolve_session_id(ref)))
    except UnreadableEvent:
        try:
            found = [UUID(ref)]
        except ValueError:
            bounds = prefix_bounds(ref.strip().lower())
            found = list(ids_in_range(store, *bounds, SESSION_STARTED)) if bounds is not None else []
        first = LogReader(store).find_event(found[0], 1) if len(found) == 1 else None
        if first is None or first.topic != SESSION_STARTED:
            raise
        return found[0]


def head_of(link: Link | None) -> dict[str, Any] | None:
    return None if link is None else {"seq": link.seq, "position": link.position, "digest": link.digest.hex()}


class Verifier:
    def __init__(self, store: Any) -> None:
        self.reader = LogReader(store)

    # -- entry points --------------------------------------------------------------------------

    def verify_all(self, anchor: dict[str, Any] | None = None, snapshots: bool = True,
                   progress: Progress | None = None) -> Verdict:
        verdict = Verdict(scope="all", events=self.reader.count_events())
        first, head = self.reader.first(), self.reader.head()
        verdict.head = head_of(head)
        report = progress or _quiet
        breaks: list[Break] = []
        if first is not None and first.seq != 1:
            breaks.append(self._gone_links(first, 1))
        seq = 0
        links = head.seq if head is not None else 0
        report("chain", 0, links)
        while not breaks:
            batch = self.reader.links_after(seq, _BATCH)
            if not batch:
                break
            found = self._check_links(batch, verdict)
            if found:
                breaks.append(found)
            seq = batch[-1].seq
            report("chain", verdict.chained, links)
        unlinked = self.reader.unlinked_positions()
        self._count_unlinked(verdict, unlinked, first, breaks)
        self._check_anchor(verdict, anchor, head, breaks)
        verdict.broken = _first(breaks)
        if snapshots:
            self._check_snapshots(verdict, progress=progress)
        return verdict

    def verify_session(self, session_id: UUID, anchor: dict[str, Any] | None = None, scope: Any = None,
                       progress: Progress | None = None) -> Verdict:
        """The links of every event the session's conversation is read from: its tree's, the turns
        a fork inherits and the attachments (runtime/session_scope.py, what `export` writes, plus
        the sessions' leases); the whole log's if that no longer loads (then `notes` says why).
        `scope`: the session's `session_scope` when the caller has read it already (`export`).

        Which aggregates those are is read from the events themselves, so a deleted or edited row
        can make the tree unloadable; the whole log still names the broken link."""
        from .session_scope import session_scope
        from .store_errors import ForgottenSession, UnknownSession

        try:
            scope = scope if scope is not None else session_scope(self.reader.store, session_id)
            ids = scope_ids(self.reader.store, scope)
        except Exception as exc:  # noqa: BLE001 - any decoding or version error of a tampered row
            if isinstance(exc, (ForgottenSession, UnknownSession)):  # its own answer everywhere, not a damaged row
                raise
            # Which rows are the tree's is read from its events, so it cannot be checked alone: the whole log names the
            # row, and the session is not verified either way.
            verdict = self.verify_all(anchor, snapshots=False, progress=progress)
            verdict.scope = str(session_id)
            verdict.unloadable, verdict.url = _unloadable(exc), self.reader.store.url
            return verdict
        verdict = self.verify_aggregates(str(session_id), ids, anchor, scope.inherited, leases=lease_ids(scope),
                                         progress=progress)
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
                          inherited: Sequence[UUID] = (), leases: Sequence[UUID] = (),
                          progress: Progress | None = None) -> Verdict:
        verdict = Verdict(scope=scope)
        first, head = self.reader.first(), self.reader.head()
        verdict.head = head_of(head)
        report = progress or _quiet
        breaks: list[Break] = []
        links = self.reader.links_of(originator_ids)
        report("chain", 0, len(links))
        for start in range(0, len(links), _BATCH):
            found = self._check_links(links[start:start + _BATCH], verdict)
            if found:
                breaks.append(found)
                break
            report("chain", verdict.chained, len(links))
        events = self.reader.events_of(originator_ids)
        verdict.events = len(events)
        inherited_ids = set(inherited)
        verdict.inherited = sum(1 for e in events if e.originator_id in inherited_ids)
        lease_set = set(leases)
        verdict.leases = sum(1 for e in events if e.originator_id in lease_set)
        linked_positions = {k.position for k in links}
        unlinked = [e for e in events if e.position not in linked_positions]
        # An event of this tree at a position whose link names an aggregate outside it was moved there.
        foreign = self.reader.links_at(e.position for e in unlinked)
        moved = [e for e in unlinked if e.position in foreign]
        if moved:
            link = foreign[moved[0].position]
            before = self.reader.links_by_seq([link.seq - 1]).get(link.seq - 1) if link.seq > 1 else None
            breaks.append(self._misplaced(link, moved[0], GENESIS if link.seq == 1 else before.digest if before else None))
        self._count_unlinked(verdict, [e.position for e in unlinked if e.position not in foreign], first, breaks)
        gap = self._version_gap(events, links)
        if gap:
            breaks.append(gap)
        self._check_anchor(verdict, anchor, head, breaks)
        verdict.broken = _first(breaks)
        self._check_snapshots(verdict, originator_ids, progress)
        return verdict

    # -- checks --------------------------------------------------------------------------------

    def _check_snapshots(self, verdict: Verdict, originator_ids: Sequence[UUID] | None = None,
                         progress: Progress | None = None) -> None:
        """Loading trusts a snapshot over the events before it, so `history` and `why` of a session read its
        tree's snapshots: those are compared with the events (once the events are proven) for one session as for
        the whole log."""
        if verdict.broken is not None:
            return
        verdict.snapshots, problem = check_snapshots(
            self.reader.store, originator_ids,
            progress=None if progress is None else lambda done, total: progress("snapshots", done, total))
        if problem is not None:
            verdict.broken = Break("snapshot", 0, "Snapshot", str(problem.aggregate_id), "Snapshot", problem.version,
                                   problem.detail)

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
            return self._misplaced(link, event, prev)
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

    def _misplaced(self, link: Link, there: RawEvent | None, prev: bytes | None = None) -> Break:
        """`prev`: the digest of the link before, when known; it tells an event whose aggregate id or version
        alone was changed (moved to another aggregate: its topic and state still hash to the link) from one replaced."""
        named = self.reader.find_event(link.originator_id, link.version)
        holds = f"; position {link.position} now holds {there.aggregate} {str(there.originator_id)[:8]} v{there.version}" if there else ""
        if named is not None:
            return self._break("reordered", link, named,
                               f"the chain has it at position {link.position}, the log at position {named.position}{holds}")
        if there is not None:
            if prev is not None and link_digest(prev, link.seq, link.position, link.originator_id, link.version, there.topic,
                                                there.state) == link.digest:
                was = f"{there.aggregate} {str(link.originator_id)[:8]} v{link.version}"
                now = f"{str(there.originator_id)[:8]} v{there.version}"
                return Break("edited", link.position, there.aggregate, str(link.originator_id), there.event, link.version,
                             f"this event ({was}) was moved to another aggregate: its id and version now read {now}, "
                             "its content is as recorded", link.seq)
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
            breaks.append(self._unlinked(event))

    def _unlinked(self, event: RawEvent) -> Break:
        """An event no link vouches for: slipped in, or its link was deleted. Links are written in position
        order with gap-free seqs, so a gap in seq between the links on either side of it is where its own
        link was: the event is as recorded (nothing says otherwise), its link is what is missing."""
        before, after = self.reader.links_around(event.position)
        low = before.seq if before is not None else 0
        if after is not None and after.seq - low > 1:
            gone = f"seq {low + 1}" if after.seq - low == 2 else f"seqs {low + 1}-{after.seq - 1}"
            return Break("missing", event.position, event.aggregate, str(event.originator_id), event.event, event.version,
                         f"the chain link that vouched for this event ({gone}) was deleted; the event is still in the log",
                         low + 1)
        return Break("inserted", event.position, event.aggregate, str(event.originator_id), event.event,
                     event.version, "no chain link vouches for this event: it was added outside Chronicle")

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

    def identity(self) -> dict[str, Any] | None:
        """What tells this store from another: its backend and its chain's first link (an event's random id, its
        position and its digest, which covers that event's time). An anchor carries it, so that one written from
        another store is said to be that, not a chain recomputed. Derived, not stored: a row holding an identity
        could be copied or rewritten like any other, and stores written before anchors carried one have it too."""
        first = self.reader.first()
        if first is None:
            return None
        return {"backend": self.reader.store.backend,
                "first": {"seq": first.seq, "position": first.position, "aggregate_id": str(first.originator_id),
                          "version": first.version, "digest": first.digest.hex()}}

    def _other_store(self, anchor: dict[str, Any]) -> str | None:
        """Why the anchor was written from another store, or None (the same store, or an anchor without an identity)."""
        written = anchor.get("store")
        if not isinstance(written, dict) or not isinstance(written.get("first"), dict):
            return None
        first = written["first"]
        try:
            seq = int(first["seq"])
            named = (int(first["position"]), UUID(str(first["aggregate_id"])), int(first["version"]), str(first["digest"]))
        except (KeyError, TypeError, ValueError):
            return None
        link = self.reader.links_by_seq([seq]).get(seq)
        if link is None:  # the first link is gone: the chain check names it (missing), not the anchor's origin
            return None
        if named == (link.position, link.originator_id, link.version, link.digest.hex()):
            return None
        then = f"a {written.get('backend', '?')} store whose chain begins with {named[1].hex[:8]} v{named[2]} at position {named[0]}"
        now = f"this {self.reader.store.backend} store's begins with {link.originator_id.hex[:8]} v{link.version} at position {link.position}"
        if (link.position, link.originator_id, link.version) == named[:3]:
            return (f"this anchor is from another store, or this store's chain was rewritten from its first event "
                    f"({then} and digest {named[3][:16]}…; here its digest is {link.digest.hex()[:16]}…)")
        return (f"this anchor is from another store (written on {then}; {now}): check it against the store it was "
                f"written from, or anchor this one with `{pasteable('verify --anchor FILE', self.reader.store.url)}`")

    def _check_anchor(self, verdict: Verdict, anchor: dict[str, Any] | None, head: Link | None, breaks: list[Break]) -> None:
        if anchor is None:
            return
        verdict.anchor = anchor
        elsewhere = self._other_store(anchor)
        if elsewhere is not None:
            breaks.append(Break("other_store", 0, "?", "?", "?", None, elsewhere))
            return
        seq, digest = int(anchor["seq"]), str(anchor["digest"])
        link = self.reader.links_by_seq([seq]).get(seq)
        if link is None:
            end = f"the chain ends at seq {head.seq}" if head else "the chain is empty"
            breaks.append(Break("missing", int(anchor["position"]), "?", "?", "?", None,
                                f"the anchored link (seq {seq}) is gone; {end}: links were deleted from the end", seq))
        elif link.digest.hex() != digest or link.position != int(anchor["position"]):
            breaks.append(Break("rewritten", link.position, "?", str(link.originator_id), "?", link.version,
                                f"link seq {seq} no longer has the anchored digest {digest[:16]}…: the chain was recomputed", seq))


def write_anchor(path: Path, verdict: Verdict, when: str, identity: dict[str, Any] | None = None,
                 replace: bool = False) -> dict[str, Any]:
    """Write the verdict's head and the store's `identity` (`Verifier.identity`) to `path`; an existing file is
    FileExistsError unless `replace`: it holds an earlier head, the proof a later `--against` needs."""
    if verdict.head is None:
        raise ValueError("the chain is empty: nothing to anchor yet")
    anchor = {**verdict.head, "anchored_at": when, "events": verdict.events, "store": identity}
    with path.open("w" if replace else "x") as out:
        out.write(json.dumps(anchor, indent=2) + "\n")
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


def lease_ids(scope: Any) -> list[UUID]:
    """The leases of a session scope's sessions (chronicle.domain.ids.lease_id)."""
    from chronicle.domain.ids import lease_id

    return [lease_id(s) for s in scope.sessions]


def scope_ids(store: Any, scope: Any, leases: bool = True) -> list[UUID]:
    """A session scope's aggregates: its tree's sessions, turns and tool calls (and leases), the
    turns and tool calls a fork among them inherits, and the attachments (runtime/session_scope.py)."""
    from .session_scope import attachment_ids

    ids = [*scope.own, *(lease_ids(scope) if leases else []), *scope.inherited]
    ids += attachment_ids(store, [*scope.own, *scope.inherited])
    return list(dict.fromkeys(ids))
