"""Encryption at rest: CHRONICLE_CIPHER_KEY turns on eventsourcing's AES-GCM cipher for the store.

The cipher encrypts each event's and snapshot's state; ids, versions, topics and positions stay
readable, so `log` ordering, leases and the hash chain work as before (the chain's digests
cover the ciphertext). Projection tables are derived read models and hold plaintext (see docs/trust.md).
A store is either encrypted from its first event
or not at all: opening it with a missing or wrong key, or an unencrypted store with a key, is one
clear error at open, before anything is read or written, rather than a decoding error later.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any, Mapping

from .config import ConfigError

CIPHER_TOPIC = "eventsourcing.cryptography:AESCipher"
HOW_TO_MAKE = "make one with `openssl rand -base64 32`"


def cipher_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """eventsourcing's CIPHER_* settings from CHRONICLE_CIPHER_KEY or CHRONICLE_CIPHER_KEY_FILE ({} if neither)."""
    env = os.environ if environ is None else environ
    key = env.get("CHRONICLE_CIPHER_KEY", "").strip()
    key_file = env.get("CHRONICLE_CIPHER_KEY_FILE", "").strip()
    if key and key_file:  # one of them was silently ignored, perhaps the one the operator meant
        raise ConfigError("both CHRONICLE_CIPHER_KEY and CHRONICLE_CIPHER_KEY_FILE are set: unset one of them")
    if key_file:
        try:
            key = Path(key_file).expanduser().read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read CHRONICLE_CIPHER_KEY_FILE {key_file}: {exc.strerror or exc}") from None
    if not key:
        return {}
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) not in (16, 24, 32):
        raise ConfigError(f"CHRONICLE_CIPHER_KEY must be 16, 24 or 32 random bytes in base64 ({HOW_TO_MAKE})")
    return {"CIPHER_TOPIC": CIPHER_TOPIC, "CIPHER_KEY": key}


def check_readable(store: Any, encrypted: bool) -> None:
    """Decode the store's first event with the configured cipher (or none); say plainly what is wrong."""
    # Only an encrypted store can hold erased content; the class lives beside the cipher code,
    # whose import (cryptography) would cost every plain store ≈ 20 ms to open.
    forgotten: tuple[type[Exception], ...] = ()
    if encrypted:
        from .shredding import ForgottenContent

        forgotten = (ForgottenContent,)
    # A plain store needs its first event only; an encrypted one may begin with erased ones.
    rows = store.recorder.select_notifications(start=None, limit=20 if encrypted else 1)
    try:
        for row in rows:
            try:
                store.mapper.to_domain_event(row)
                return
            except forgotten:  # erased on purpose (`forget`): says nothing about the key, try the next
                continue
    except Exception:  # noqa: BLE001 - any decrypt or decode failure means the key does not fit
        where = store.describe()
        if encrypted:
            raise ConfigError(f"cannot decrypt {where}: CHRONICLE_CIPHER_KEY is not the key it was written with, "
                              "or the store was written without encryption (then unset CHRONICLE_CIPHER_KEY)") from None
        raise ConfigError(f"{where} is encrypted: set CHRONICLE_CIPHER_KEY (or CHRONICLE_CIPHER_KEY_FILE) to its key") from None
