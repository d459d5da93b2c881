"""Everything a store holds, read past the application: the SQLite files' bytes, or `pg_dump`."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from chronicle.runtime.compression import SizedZlib


def dump_store(db_url: str) -> bytes:
    """The raw bytes, then every event and snapshot state decompressed (runtime/compression.py stores
    them compressed, which would hide a secret from a byte search; encrypted ones stay as they are)."""
    if db_url.startswith("sqlite:"):
        path = Path(urlparse(db_url).path)
        raw = b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
        with sqlite3.connect(path) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            states = [bytes(r[0]) for t in tables if t in ("stored_events", "stored_snapshots")
                      for r in conn.execute(f"SELECT state FROM {t}")]
        return raw + b"\n".join(_plain(s) for s in states)
    base, _, schema = db_url.partition("?schema=")
    done = subprocess.run(["pg_dump", "--no-owner", f"--schema={schema}", base], capture_output=True, check=True, timeout=120)
    import psycopg

    with psycopg.connect(base) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))]
        states = [bytes(r[0]) for t in tables if t.endswith(("_events", "_snapshots"))
                  for r in conn.execute(f'SELECT state FROM "{schema}"."{t}"')]
    return done.stdout + b"\n".join(_plain(s) for s in states)


def _plain(state: bytes) -> bytes:
    try:
        return SizedZlib().decompress(state)
    except Exception:  # noqa: BLE001 - encrypted (master or tree key): nothing to decompress
        return b""


def holds(dump: bytes, secret: str) -> bool:
    """The secret as text, or hex-encoded as PostgreSQL writes a bytea column."""
    return secret.encode() in dump or secret.encode().hex().encode() in dump.lower()
