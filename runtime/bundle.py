"""Export a session tree as one self-contained, verifiable file, and import it into another store.

A bundle is one JSON document: the tree's stored events in log order (with the Attachment
aggregates its inputs refer to, which an import skips when the target already holds them: they
are content-addressed, so the same id means the same bytes), and, for a fork, the turns and tool
calls it inherits from the session it was forked from (runtime/session_scope.py: without them the
fork's history, replay and next turn cannot be read), exactly as stored (topic and
state bytes, so nothing is re-encoded on the way), each with the digest it had in the source's
chain and a digest of the bundle's own chain, which runs over the bundle's events alone. The
source chain cannot be re-checked without the source's other sessions; the bundle chain can, by
anyone, with nothing else. The manifest holds the counts and the bundle chain's head, so a
signature over the manifest (Ed25519) covers every event.

Import checks everything before writing anything (each event's source digest too, where the bundle
allows: runtime/bundle_source.py; and that every aggregate it would write is one of the bundle's sessions':
runtime/bundle_owners.py), then writes all events (and the index entries
that list them: the sessions', and their tasks' on the board and reflection indexes; and an entry
of the import log, runtime/import_log.py, naming the sessions and where the bundle came from) in one transaction: a bundle is
either loaded whole or not at all. The bundle's own session must be new to the target; any other
aggregate it already holds with the very same events, byte for byte (the turns two forks of one session
both inherit, a parent imported before or after its fork, a sub-agent's session imported alone before
its parent's tree), is kept and the bundle's copy skipped, and one it holds with other events refuses
the import.

A bundle carries the tree's task boards (runtime/session_scope.py) as it carries its turns; a /2
bundle written before that has none, and imports with empty boards.

Formats: chronicle-bundle/2 adds `inherited` and `inherited_from` to the manifest (and
`counts.inherited`). A chronicle-bundle/1 bundle still imports; one of a fork carries none of the
turns the fork inherits, so it is refused unless the target already holds them.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, StoredEvent

from .bundle_owners import NotTheBundles, check_owners
from .bundle_source import SourceMismatch, check_source_digests
from .chain import GENESIS, link_digest
from .chain_reader import LogReader, RawEvent
from .import_log import Provenance, import_log, unanswered_turns
from .session_scope import attachment_ids, session_scope
from .shredding import tree_of_header

FORMAT = "chronicle-bundle/2"
#: Formats import reads: /1 was written before bundles carried what a fork inherits.
FORMATS = ("chronicle-bundle/1", FORMAT)


class BundleError(ValueError):
    """A bundle that must not be loaded; the message names what is wrong."""


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# -- export ------------------------------------------------------------------------------------


def export_bundle(store: Any, root_id: UUID, private_key_pem: bytes | None = None, now: datetime | None = None,
                  scope: Any = None) -> dict[str, Any]:
    """The bundle of the session's tree as the store holds it, chain unchecked: the use case
    (runtime/app/bundles.py) verifies the chain first and refuses a broken one. `scope`: its
    `session_scope`, when the caller has read it already."""
    from chronicle.domain.ids import SESSION_INDEX_ID

    reader = LogReader(store)
    scope = scope if scope is not None else session_scope(store, root_id)
    sessions = scope.sessions
    ids = scope.own + scope.inherited
    attachments = attachment_ids(store, ids)
    inherited = set(scope.inherited)
    events = reader.events_of(ids + attachments)
    log_links = reader.links_at(e.position for e in events)
    indexed = set(store.session_ids()) & set(sessions)
    entries, prev = [], GENESIS
    for i, event in enumerate(events, start=1):
        prev = _digest(prev, i, event)
        link = log_links.get(event.position)
        entries.append({
            "i": i, "position": event.position, "originator_id": str(event.originator_id), "version": event.version,
            "topic": event.topic, "state": base64.b64encode(event.state).decode(),
            "log_digest": link.digest.hex() if link and link.originator_id == event.originator_id else None,
            "digest": prev.hex(),
        })
    head = reader.head()
    manifest = {
        "format": FORMAT,
        "session_id": str(root_id),
        "sessions": [str(s) for s in sessions],
        "indexed_sessions": [str(s) for s in sessions if s in indexed],
        "exported_at": (now or datetime.now(timezone.utc)).isoformat(),
        "source": {"backend": store.backend, "head": None if head is None else {"seq": head.seq, "position": head.position,
                                                                                 "digest": head.digest.hex()}},
        "counts": {"events": len(entries), "aggregates": len({e["originator_id"] for e in entries}),
                   "sessions": len(sessions), "attachments": len(attachments),
                   "inherited": sum(1 for e in events if e.originator_id in inherited)},
        "attachments": [str(a) for a in attachments],
        # A fork's inherited turns and tool calls, and the sessions they were recorded in (not in the bundle).
        "inherited": [str(i) for i in scope.inherited],
        "inherited_from": [str(s) for s in scope.inherited_from],
        "head": prev.hex() if entries else GENESIS.hex(),
    }
    trees = sorted({str(t) for e in events if (t := tree_of_header(e.state)) is not None})
    if trees:  # per-session data keys (runtime/shredding.py), wrapped by the master key the target needs anyway
        manifest["tree_keys"] = {t: base64.b64encode(store.mapper.keys.wrapped(UUID(t))).decode() for t in trees}
    assert SESSION_INDEX_ID not in ids
    bundle: dict[str, Any] = {"manifest": manifest, "events": entries, "signature": None}
    if private_key_pem is not None:
        bundle["signature"] = sign(manifest, private_key_pem)
    return bundle


def _digest(prev: bytes, i: int, event: RawEvent) -> bytes:
    return link_digest(prev, i, event.position, event.originator_id, event.version, event.topic, event.state)


# -- signatures --------------------------------------------------------------------------------


def sign(manifest: dict[str, Any], private_key_pem: bytes) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise BundleError(f"the signing key is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError("the signing key is not an Ed25519 key (make one with `chronicle keygen`)")
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"algorithm": "ed25519", "public_key": public.hex(), "value": key.sign(canonical(manifest)).hex()}


def public_key_hex(pem: bytes) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    try:
        key: Any = serialization.load_pem_public_key(pem)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(pem, password=None).public_key()
        except (ValueError, TypeError) as exc:
            raise BundleError(f"not a PEM Ed25519 key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BundleError("not an Ed25519 key")
    assert not isinstance(key, Ed25519PrivateKey)
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def keygen(path: Path) -> Path:
    """An Ed25519 key pair: PATH (private, PEM, mode 0600) and PATH.pub (public, PEM)."""
    import os

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(private)
    public = path.with_name(path.name + ".pub")
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return public


# -- checking and import -----------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    manifest: dict[str, Any]
    events: list[StoredEvent]
    signer: str | None
    #: Whether the caller required a signature by a given key (`import --key`): part of the import's provenance.
    key_required: bool = False
    #: The sha256 of the bundle as it was read (a file's bytes), when it was given as bytes or text.
    sha256: str | None = None


def check_bundle(bundle: Any, trusted_key_hex: str | None = None) -> Checked:
    """Everything import relies on, checked before anything is written."""
    if not isinstance(bundle, dict) or not isinstance(bundle.get("manifest"), dict) or not isinstance(bundle.get("events"), list):
        raise BundleError("not a Chronicle bundle (no manifest and events)")
    manifest, entries = bundle["manifest"], bundle["events"]
    if manifest.get("format") not in FORMATS:
        raise BundleError(f"unknown bundle format {manifest.get('format')!r} (this Chronicle reads {' and '.join(FORMATS)})")
    signer = _check_signature(manifest, bundle.get("signature"), trusted_key_hex)
    events: list[StoredEvent] = []
    raw: list[RawEvent] = []
    prev = GENESIS
    try:
        for i, entry in enumerate(entries, start=1):
            event = RawEvent(int(entry["position"]), UUID(entry["originator_id"]), int(entry["version"]), str(entry["topic"]),
                             base64.b64decode(entry["state"], validate=True))
            raw.append(event)
            if int(entry["i"]) != i:
                raise BundleError(f"bundle event {i} is numbered {entry['i']}: events were removed or reordered")
            prev = _digest(prev, i, event)
            if prev.hex() != entry["digest"]:
                raise BundleError(f"bundle event {i} (position {event.position}, {event.aggregate} {event.event} "
                                  f"v{event.version}) does not match its digest: it was edited")
            events.append(StoredEvent(originator_id=event.originator_id, originator_version=event.version,
                                      topic=event.topic, state=event.state))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"malformed bundle event: {exc}") from None
    counts = manifest.get("counts") or {}
    if counts.get("events") != len(events):
        raise BundleError(f"the manifest counts {counts.get('events')} events, the bundle holds {len(events)}")
    if manifest.get("head") != (prev.hex() if events else GENESIS.hex()):
        raise BundleError("the bundle's events do not end at the manifest's head digest: events were removed or added")
    try:  # an edit made in the source before the export, by code that exported a broken chain (runtime/bundle_source.py)
        check_source_digests(manifest, entries, raw)
    except (SourceMismatch, TypeError, ValueError) as exc:
        raise BundleError(str(exc) if isinstance(exc, SourceMismatch) else f"malformed log_digest: {exc}") from None
    return Checked(manifest, events, signer, key_required=trusted_key_hex is not None)


def _check_signature(manifest: dict[str, Any], signature: Any, trusted_key_hex: str | None) -> str | None:
    if signature is None:
        if trusted_key_hex is not None:
            raise BundleError("the bundle is not signed, but --key asks for a signature")
        return None
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        if signature.get("algorithm") != "ed25519":
            raise BundleError(f"unknown signature algorithm {signature.get('algorithm')!r}")
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(signature["public_key"]))
        key.verify(bytes.fromhex(signature["value"]), canonical(manifest))
    except InvalidSignature:
        raise BundleError("the signature does not match the manifest: the bundle was changed after signing") from None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"malformed signature: {exc}") from None
    if trusted_key_hex is not None and signature["public_key"] != trusted_key_hex:
        raise BundleError(f"signed by key {signature['public_key'][:16]}…, not by the --key given ({trusted_key_hex[:16]}…)")
    return str(signature["public_key"])


@dataclass(frozen=True)
class Imported:
    #: Events written.
    events: int
    #: Events of the bundle the store already held, the same (attachments, inherited turns): skipped.
    already_held: int
    #: What the import log recorded of where the bundle came from (None: the bundle lists no session to index).
    provenance: Provenance | None = None


def import_bundle(store: Any, checked: Checked, actor: str | None = None) -> Imported:
    """Write the bundle's events and index entries in one transaction, less what the store already holds.
    `actor`: who imports it, for the import log's provenance (default: this process's user)."""
    _install_tree_keys(store, checked.manifest.get("tree_keys") or {})
    decoded = []
    for event in checked.events:
        try:
            decoded.append(store.mapper.to_domain_event(event))
        except Exception:  # noqa: BLE001 - ciphertext under another key, or plaintext into an encrypted store
            raise BundleError(f"event {event.originator_id} v{event.originator_version} does not decode in this store: the bundle "
                              "came from a store encrypted with another CHRONICLE_CIPHER_KEY (set that key to import it)") from None
    for _ in range(50):
        kept = _new_events(store, checked)
        arriving = {UUID(str(e.originator_id)) for e in kept}
        _check_inherited(store, decoded, arriving)
        try:
            check_owners(checked.manifest, decoded, arriving, lambda oid: bool(store.recorder.select_events(oid, limit=1)))
        except NotTheBundles as exc:
            raise BundleError(str(exc)) from None
        index_events: list[Any] = []
        # A session already here (a sub-agent imported alone before) was listed and logged by that import.
        listed = [UUID(sid) for sid in checked.manifest.get("indexed_sessions", []) if UUID(sid) in arriving]
        for sid in listed:
            following = index_events[-1].originator_version + 1 if index_events else None
            index_events.append(store.session_index.trigger_event(following, session_id=sid))
        index_events += _task_index_events(store, decoded, arriving)
        origin = provenance(checked, actor) if listed else None
        if origin is not None:  # their channel turns' replies are the source's (import_log.py)
            new = [e for e in decoded if UUID(str(e.originator_id)) in arriving]
            index_events.append(import_log(store).trigger_event(
                session_ids=listed, unanswered_turns=unanswered_turns(new), provenance=origin))
        stored = [*kept, *(store.mapper.to_stored_event(e) for e in index_events)]
        try:
            store.recorder.insert_events(stored)
            return Imported(len(kept), len(checked.events) - len(kept), origin)
        except IntegrityError:
            continue  # another writer took the index slot, or imported an aggregate meanwhile: look again
    raise BundleError("could not index the imported sessions and tasks after 50 attempts")


def provenance(checked: Checked, actor: str | None = None) -> Provenance:
    """Where the bundle came from, as its (checked) manifest and the caller say: runtime/import_log.py."""
    from .actor import process_actor

    manifest = checked.manifest
    head = (manifest.get("source") or {}).get("head")
    exported_at = manifest.get("exported_at")
    return Provenance(
        signed_by=checked.signer, key_required=checked.key_required, bundle_head=str(manifest.get("head")),
        source_head=({k: head.get(k) for k in ("seq", "position", "digest")} if isinstance(head, dict) else None),
        exported_at=exported_at if isinstance(exported_at, str) else None, bundle_sha256=checked.sha256,
        actor=actor or process_actor(),
    )


def _task_index_events(store: Any, decoded: list[Any], arriving: set[UUID]) -> list[Any]:
    """The index entries that list the bundle's tasks where they are read from (runtime/task_board.py):
    a posted task on its session's board, a failed task's reflection in the reflection index (which
    later delegations search). Index logs are no session's, so a bundle carries none; they are
    written here from the task events themselves, in the bundle's order, as the source wrote them.
    A posted task on a board outside the bundle is refused unless a sub-agent of the bundle claimed it on
    its own parent's board (a sub-agent exported alone) and that parent is not in this store either."""
    from .task_board import board_index, reflection_index

    entries: list[Any] = []
    following: dict[UUID, int] = {}
    started = {UUID(str(e.originator_id)): e for e in decoded if type(e).__qualname__ == "Session.Started"}
    sessions = set(started)
    # A sub-agent exported alone carries the task it claimed on its parent's board (runtime/session_scope.py).
    claimed = {UUID(str(e.originator_id)): e.child_session_id for e in decoded if type(e).__qualname__ == "DelegatedTask.ClaimedByChild"}

    def append(log: Any, **fields: Any) -> None:
        entry = log.trigger_event(following.get(log.originator_id), **fields)
        following[log.originator_id] = entry.originator_version + 1
        entries.append(entry)

    for event in decoded:
        if UUID(str(event.originator_id)) not in arriving:
            continue
        name = type(event).__qualname__
        if name == "DelegatedTask.Posted":
            board = event.parent_session_id
            if board not in sessions:
                # Only a sub-agent exported alone brings a task of a board outside the bundle: the one it claimed
                # on its parent's board. Listed there, as at home, so the child finds it (runtime/task_board.py's
                # sub_agent_task_id) while its parent is not here; a board of this store's own is no bundle's to add to.
                claimer = claimed.get(UUID(str(event.originator_id)))
                child = started.get(claimer) if claimer is not None else None
                if child is None or child.parent_session_id != board:
                    raise BundleError(f"task {event.originator_id} is posted on the board of session {board}, "
                                      "which is not in the bundle: the bundle was not written by `export`")
                if store.recorder.select_events(board, limit=1):
                    raise BundleError(f"task {event.originator_id} is posted on the board of session {board}, which this "
                                      "store holds: a bundle may not add to the board of a session it does not carry")
            append(board_index(store, board), task_id=event.originator_id)
        elif name == "DelegatedTask.ReflectionRecorded":
            append(reflection_index(store), task_id=event.originator_id)
    return entries


def _new_events(store: Any, checked: Checked) -> list[StoredEvent]:
    """The bundle's events less those of aggregates the store already holds as the bundle does.

    The bundle's own session must be new: one already here means the bundle (or another export of
    the session) was imported before. An attachment already here is the same bytes (its id is its
    content hash). Any other aggregate already here is skipped only if the store holds exactly the
    bundle's events for it, byte for byte: a turn a fork inherits, or a sub-agent's session (with its
    turns and tool calls) imported alone before its parent's tree was. Refused otherwise, saying what
    to do."""
    root = UUID(checked.manifest["session_id"])
    sessions = {UUID(s) for s in checked.manifest.get("sessions", [])}
    shared = {UUID(a) for a in checked.manifest.get("attachments", [])}
    by_aggregate: dict[UUID, list[StoredEvent]] = {}
    for event in checked.events:
        by_aggregate.setdefault(UUID(str(event.originator_id)), []).append(event)
    held = {oid: store.recorder.select_events(oid) for oid in by_aggregate}
    held = {oid: rows for oid, rows in held.items() if rows}
    if root in held:
        raise BundleError(f"this store already holds aggregate {root}: the session was imported or recorded here before")
    for oid, rows in held.items():
        if oid in shared:
            continue
        ours = [(e.originator_version, e.topic, e.state) for e in by_aggregate[oid]]
        if [(r.originator_version, r.topic, bytes(r.state)) for r in rows] != ours:
            what = f"session {oid} of the bundle's tree" if oid in sessions else f"aggregate {oid}"
            raise BundleError(f"this store already holds {what} with other events than the bundle's ({len(rows)} here, "
                              f"{len(ours)} in the bundle): it went on here or in the source after one of them was exported, "
                              "and a store holds one copy of it; import this tree into a store that does not hold it (a "
                              "tree's top session's bundle carries its sub-agents: import that one alone)")
    return [e for e in checked.events if UUID(str(e.originator_id)) not in held]


def _check_inherited(store: Any, decoded: list[Any], arriving: set[UUID]) -> None:
    """Every turn a fork of the bundle starts with must arrive with it or be here already: a
    chronicle-bundle/1 export of a fork carried none of them."""
    for event in decoded:
        if type(event).__qualname__ != "Session.Started" or not getattr(event, "forked_from", None):
            continue
        for turn in event.head:
            if turn not in arriving and not store.recorder.select_events(turn, limit=1):
                origin = event.forked_from.get("session_id")
                raise BundleError(f"session {event.originator_id} is a fork and inherits turn {turn} of session {origin}, "
                                  "which neither the bundle nor this store holds (an export written before bundles carried "
                                  f"what a fork inherits): import {origin} first, or export the fork again")


def _install_tree_keys(store: Any, keys: dict[str, str]) -> None:
    """The bundle's session-tree keys, before its events are decoded (they need them)."""
    if not keys:
        return
    from .shredding import ForgottenContent, TreeKeyMapper

    if not isinstance(store.mapper, TreeKeyMapper):
        raise BundleError("the bundle is encrypted: set the CHRONICLE_CIPHER_KEY of the store it came from to import it")
    for tree, wrapped in keys.items():
        try:
            store.mapper.keys.install(UUID(tree), base64.b64decode(wrapped, validate=True))
        except ForgottenContent as exc:
            raise BundleError(f"{exc} in this store; it is not imported again") from None
        except Exception:  # noqa: BLE001 - InvalidTag: wrapped by another master key; or a damaged entry
            raise BundleError(f"the key of session tree {tree} does not open with this store's CHRONICLE_CIPHER_KEY: "
                              "the bundle came from a store encrypted with another key (set that key to import it)") from None
