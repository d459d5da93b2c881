"""The floor: one raw INSERT + COMMIT of a 500-byte row, with nothing around it.

SQLite in WAL mode with synchronous=FULL (what eventsourcing and LangGraph run with) and
psycopg against the same PostgreSQL; this is the least any durable per-step write can cost.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

ROW = os.urandom(250).hex().encode()  # 500 bytes


def sqlite_floor(where: Path, count: int = 2000) -> float:
    """ms per INSERT+COMMIT."""
    conn = sqlite3.connect(where / "floor.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, data BLOB)")
    started = time.perf_counter()
    for _ in range(count):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO floor (data) VALUES (?)", (ROW,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed / count * 1000


def pg_floor(pg: Any, count: int = 2000) -> float:
    import psycopg

    schema = pg.new_schema()
    with psycopg.connect(pg.base) as conn:
        conn.execute(f'CREATE TABLE "{schema}".floor (id BIGSERIAL PRIMARY KEY, data BYTEA)')
        conn.commit()
        started = time.perf_counter()
        for _ in range(count):
            conn.execute(f'INSERT INTO "{schema}".floor (data) VALUES (%s)', (ROW,))
            conn.commit()
        elapsed = time.perf_counter() - started
    return elapsed / count * 1000
