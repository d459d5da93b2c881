"""`chronicle export / import / keygen`: move a session tree between stores as one verifiable file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app import bundles
from chronicle.runtime.bundle import keygen as make_keys

from .bars import progress_bar
from .common import DbOption, JsonOption, cli_errors, fail, open_store, out_console, print_json, replace_file
from .interrupts import noted
from .render import ascii_json


def export(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix; its sub-agents (and a fork's inherited turns) come along")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the bundle here (default: standard output)")] = None,
    sign_with: Annotated[Optional[Path], typer.Option("--sign", help="Sign the manifest with this Ed25519 private key (PEM)")] = None,
    db: DbOption = None,
) -> None:
    """Write a self-contained bundle of the session tree (a fork with the turns it inherits): its events in order with digests, a manifest with counts and the head digest, and an Ed25519 signature with --sign."""
    with cli_errors():
        key = None
        if sign_with is not None:
            try:
                key = sign_with.read_bytes()
            except OSError as exc:
                fail(f"cannot read the signing key {sign_with}: {exc.strerror or exc}", 2)
        if out is not None:
            _writable_path(out)  # before the export's seconds of work
        store = open_store(db, create=False)
        sid = store.resolve_session_id(session)
        nothing = f"nothing was written to {out}" if out is not None else "nothing was written"
        with progress_bar() as tracker, noted(lambda: f"export stopped before the bundle was complete; {nothing}"):
            bundle = bundles.export(store, sid, key, progress=tracker)
            text = json.dumps(bundle, ensure_ascii=False, indent=1) + "\n"
        if out is None:
            sys.stdout.write(json.dumps(bundle, ensure_ascii=True, indent=1) + "\n" if ascii_json() else text)
            return
        try:
            replace_file(out, text)
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}")
        counts = bundle["manifest"]["counts"]
        signed = " (signed)" if bundle["signature"] else ""
        # `verify SESSION` counts the sessions' leases too (a lease is this store's, never exported): said, as it says it.
        out_console.print(escape(f"exported session {sid}: {counts['events']} events of {counts['sessions']} session(s), "
                                 f"their leases left out, to {out}{signed}; head {bundle['manifest']['head']}"), soft_wrap=True)


def _writable_path(out: Path) -> None:
    """A path a file can be written at, or a usage error (exit 2, as `--sign DIR`, `import DIR` and `keygen DIR`)."""
    if out.is_dir():
        fail(f"cannot write {out}: it is a directory; give the bundle's file name (`-o {out / 'bundle.json'}`)", 2)
    if not out.parent.is_dir():
        fail(f"cannot write {out}: {out.parent} is not a directory", 2)


def import_(
    bundle_file: Annotated[Path, typer.Argument(metavar="FILE", help="A bundle written by `chronicle export`")],
    key: Annotated[Optional[Path], typer.Option("--key", help="Only accept a bundle signed by this Ed25519 key (PEM, public or private)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Verify a bundle's chain and signature, then load it into this store (all or nothing), after which history, replay, audit and cost work on it. A tampered or wrongly signed bundle exits 1 and records nothing."""
    with cli_errors():
        try:
            raw = bundle_file.read_bytes()
        except OSError as exc:
            fail(f"cannot read {bundle_file}: {exc.strerror or exc}", 2)
        try:
            pem = key.read_bytes() if key is not None else None
        except OSError as exc:
            fail(f"cannot read the key {key}: {exc.strerror or exc}", 2)
        trusted = bundles.trusted_key(pem, str(key))
        checked = bundles.check(raw, trusted, str(bundle_file))  # refused before the store is opened (or created)
        result = bundles.import_checked(open_store(db), checked, str(bundle_file))  # actor: this process's user
        if as_json:
            print_json(result)
            return
        signer = f", signed by {result['signed_by'][:16]}…" if result["signed_by"] else ", unsigned"
        held = f" ({result['already_held']} more already here)" if result["already_held"] else ""
        out_console.print(escape(f"imported session {result['session_id']}: {result['events']} events{held}, "
                                 f"{result['sessions']} session(s){signer}"), soft_wrap=True)


def keygen(
    keyfile: Annotated[str, typer.Argument(metavar="KEYFILE", help="Where to write the private key; the public key goes to KEYFILE.pub")],
) -> None:
    """Make an Ed25519 key pair for `export --sign` (the same as `openssl genpkey -algorithm ed25519 -out KEYFILE`)."""
    with cli_errors():
        if not keyfile.strip():  # as a Path, '' was '.', refused as "exists"
            fail("KEYFILE is empty: name the file to write the private key to", 2)
        out = Path(keyfile)
        if out.is_dir():
            fail(f"{out} is a directory: name the file to write the private key to (`{out / 'signing.pem'}`)", 2)
        try:
            public = make_keys(out)
        except FileExistsError:
            fail(f"{out} exists; not overwriting a key", 2)
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}", 2)
        out_console.print(escape(f"private key {out} (keep it secret), public key {public}"), soft_wrap=True)
