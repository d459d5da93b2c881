"""Export and import of a session tree as one verifiable bundle (`chronicle export` / `import`), and the
chain's check (`chronicle verify`): the use cases the CLI and the library share.

The CLI reads and writes files; these take and give the bundle as data, so a program can keep it where
it likes (a file, an object store, a message) and gets exactly what `export` writes and `import --json`
prints. Every refusal is an AppError with the CLI's words and code; an import refused records nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any
from uuid import UUID

from ..bundle import BundleError, Checked, check_bundle, export_bundle, import_bundle, public_key_hex
from ..pasteable import pasteable
from ..session_scope import session_scope
from ..store import ChronicleStore
from ..verify import Progress, Verifier
from .errors import AppError
from .queries import session_id


def export(store: ChronicleStore, ref: str | UUID, private_key_pem: bytes | None = None,
           progress: Progress | None = None) -> dict[str, Any]:
    """The bundle of the session's tree, signed with the Ed25519 key when one is given (code 2 if it is not one).

    The tree's chain is checked first, exactly as `verify SESSION` checks it, and a broken one refused (code 1):
    an import writes the events with new links of the target's chain, so a bundle of an edited row would come
    out of the target verified, the edit laundered, and a signature would vouch for it.

    `progress(phase, done, total)` as it goes (runtime/verify.py's, with the phases "reading" before and
    "writing" after the check)."""
    report = progress or (lambda phase, done, total: None)
    sid = session_id(store, ref)
    report("reading", 0, None)
    scope = session_scope(store, sid)  # a row that does not decode, or is gone, says so here as every reader does
    verdict = Verifier(store).verify_session(sid, scope=scope, progress=progress)
    if verdict.broken is not None:
        # A forged snapshot is what the tree's aggregates (and so which rows the bundle takes) were read from.
        what = "it has a " if verdict.broken.kind == "snapshot" else "its hash chain is "
        raise AppError(f"refused to export session {sid}: {what}{verdict.broken.line()}; nothing written. "
                       f"`{pasteable(f'verify {sid}', store.url)}` shows it; export from a backup that verifies (an import "
                       "would give the damaged rows new, valid links in the target)")
    report("writing", 0, None)
    try:
        return export_bundle(store, sid, private_key_pem, scope=scope)
    except BundleError as exc:
        raise AppError(str(exc), 2) from None


def trusted_key(pem: bytes | None, where: str = "the key") -> str | None:
    """The public key (hex) an import accepts only bundles signed by, from a PEM (public or private)."""
    if pem is None:
        return None
    try:
        return public_key_hex(pem)
    except BundleError as exc:
        raise AppError(f"{where}: {exc}", 2) from None


def check(bundle: Any, trusted_key_hex: str | None = None, source: str = "the bundle") -> Checked:
    """`bundle` (its JSON text, bytes, or the parsed object) verified: its chain, counts and signature. Nothing is read
    from or written to a store, so the CLI refuses a bundle before it opens (or creates) one. AppError 1 if refused."""
    digest = None
    if isinstance(bundle, (bytes, bytearray, str)):
        digest = hashlib.sha256(bundle.encode() if isinstance(bundle, str) else bytes(bundle)).hexdigest()
        try:
            bundle = json.loads(bundle)
        except json.JSONDecodeError as exc:
            raise AppError(f"refused {source}: not a Chronicle bundle (invalid JSON: {exc.msg} at line {exc.lineno}); "
                           "nothing recorded") from None
    try:
        return replace(check_bundle(bundle, trusted_key_hex), sha256=digest)
    except BundleError as exc:
        raise AppError(f"refused {source}: {exc}; nothing recorded") from None


def import_checked(store: ChronicleStore, checked: Checked, source: str = "the bundle", actor: str | None = None) -> dict[str, Any]:
    """Load a verified bundle in one transaction: `import --json`'s row, with the provenance the import log
    records (runtime/import_log.py; `actor` defaults to this process's user). One the store cannot take (already
    imported, an aggregate it holds with other events, or one of another session's) is AppError 1, nothing recorded."""
    try:
        imported = import_bundle(store, checked, actor)
    except BundleError as exc:
        raise AppError(f"refused {source}: {exc}; nothing recorded") from None
    manifest = checked.manifest
    return {"session_id": manifest["session_id"], "events": imported.events, "already_held": imported.already_held,
            "sessions": len(manifest["sessions"]), "head": manifest["head"], "signed_by": checked.signer,
            "provenance": dict(imported.provenance) if imported.provenance is not None else None}


def import_(store: ChronicleStore, bundle: Any, trusted_key_hex: str | None = None, source: str = "the bundle",
            actor: str | None = None) -> dict[str, Any]:
    """`check` then `import_checked`."""
    return import_checked(store, check(bundle, trusted_key_hex, source), source, actor)
