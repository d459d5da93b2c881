"""Export a session tree as one self-contained, verifiable file, and import it into another store.

A bundle is one JSON document: the tree's stored events in log order (with the Attachment
aggregates its inputs refer to, which an import skips when the target already holds them: they
are content-addressed, so the same id means the same bytes), exactly as stored (topic and
state bytes, so nothing is re-encoded on the way), each with the digest it had in the source's
chain and a digest of the bundle's own chain, which runs over the bundle's events alone. The
source chain cannot be re-checked without the source's other sessions; the bundle chain can, by
anyone, with nothing else. The manifest holds the counts and the bundle chain's head, so a
signature over the manifest (Ed25519) covers every event.

Import checks everything before writing anything, then writes all events (and the session index
entries) in one transaction: a bundle is either loaded whole or not at all.
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

from .chain import GENESIS, link_digest
from .chain_reader import LogReader, RawEvent
from .shredding import tree_of_header

FORMAT = "chronicle-bundle/1"


class BundleError(ValueError):
    """A bundle that must not be loaded; the message names what is wrong."""


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# -- export ------------------------------------------------------------------------------------


def export_bundle(store: Any, root_id: UUID, private_key_pem: bytes | None = None, now: datetime | None = None) -> dict[str, Any]:
    from chronicle.domain.ids import SESSION_INDEX_ID

    from .agents.tree import walk

    reader = LogReader(store)
    sessions = [node.session.id for node in walk(store, store.session(root_id))]
    ids: list[UUID] = []
    for sid in sessions:
        ids += store.aggregate_ids_of(store.session(sid))
    ids = list(dict.fromkeys(ids))
    attachments = attachment_ids(store, ids)
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
                   "sessions": len(sessions), "attachments": len(attachments)},
        "attachments": [str(a) for a in attachments],
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


def attachment_ids(store: Any, aggregate_ids: list[UUID]) -> list[UUID]:
    """Attachments the tree's events refer to (content blocks whose source names an attachment's sha256)."""
    from chronicle.domain.ids import attachment_id

    found: dict[UUID, None] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "attachment" and isinstance(value.get("sha256"), str):
                found[attachment_id(value["sha256"])] = None
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif hasattr(value, "model_dump"):
            walk(value.model_dump())

    for _position, event in store.events_with_positions(aggregate_ids):
        walk(vars(event))
    return list(found)


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


def check_bundle(bundle: Any, trusted_key_hex: str | None = None) -> Checked:
    """Everything import relies on, checked before anything is written."""
    if not isinstance(bundle, dict) or not isinstance(bundle.get("manifest"), dict) or not isinstance(bundle.get("events"), list):
        raise BundleError("not a Chronicle bundle (no manifest and events)")
    manifest, entries = bundle["manifest"], bundle["events"]
    if manifest.get("format") != FORMAT:
        raise BundleError(f"unknown bundle format {manifest.get('format')!r} (this Chronicle reads {FORMAT})")
    signer = _check_signature(manifest, bundle.get("signature"), trusted_key_hex)
    events: list[StoredEvent] = []
    prev = GENESIS
    try:
        for i, entry in enumerate(entries, start=1):
            event = RawEvent(int(entry["position"]), UUID(entry["originator_id"]), int(entry["version"]), str(entry["topic"]),
                             base64.b64decode(entry["state"], validate=True))
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
    return Checked(manifest, events, signer)


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


def import_bundle(store: Any, checked: Checked) -> int:
    """Write the bundle's events and index entries in one transaction; returns how many events."""
    _install_tree_keys(store, checked.manifest.get("tree_keys") or {})
    for event in checked.events:
        try:
            store.mapper.to_domain_event(event)
        except Exception:  # noqa: BLE001 - ciphertext under another key, or plaintext into an encrypted store
            raise BundleError(f"event {event.originator_id} v{event.originator_version} does not decode in this store: the bundle "
                              "came from a store encrypted with another CHRONICLE_CIPHER_KEY (set that key to import it)") from None
    shared = {UUID(a) for a in checked.manifest.get("attachments", [])}
    kept = [e for e in checked.events if not (e.originator_id in shared and store.recorder.select_events(e.originator_id, limit=1))]
    present = [e.originator_id for e in kept if store.recorder.select_events(e.originator_id, limit=1)]
    if present:
        raise BundleError(f"this store already holds aggregate {present[0]}: the session was imported or recorded here before")
    for _ in range(50):
        index_events: list[Any] = []
        for sid in checked.manifest.get("indexed_sessions", []):
            following = index_events[-1].originator_version + 1 if index_events else None
            index_events.append(store.session_index.trigger_event(following, session_id=UUID(sid)))
        stored = [*kept, *(store.mapper.to_stored_event(e) for e in index_events)]
        try:
            store.recorder.insert_events(stored)
            return len(kept)
        except IntegrityError:
            if any(store.recorder.select_events(e.originator_id, limit=1) for e in kept):
                raise BundleError("another process imported the same session meanwhile") from None
            continue  # another writer took the index slot: take the next one
    raise BundleError("could not index the imported sessions after 50 attempts")


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
