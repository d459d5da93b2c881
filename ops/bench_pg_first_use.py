"""Measure what a PostgreSQL backend just started costs a store's first statements.

    .venv/bin/python ops/bench_pg_first_use.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--connections 15]

The bench's cold rows (a fork + step, `history --at` on a store just opened) run on a connection
whose server process has never opened the store's tables nor called its save function; the same
statements on a second use are cheaper. This isolates that difference: in a fresh schema with one
session recorded, each of `--connections` new connections runs one read, then the save function
twice (`chronicle_save_chained`, runtime/chain_postgres.py), and a trivial PL/pgSQL function twice
on another new connection. It prints medians in ms. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any, Callable

import psycopg

from chronicle.runtime.chain_postgres import SAVE_FUNCTION
from chronicle.runtime.store import ChronicleStore


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--connections", type=int, default=15)
    args = parser.parse_args()
    schema = f"first_use_{uuid.uuid4().hex[:8]}"
    store = ChronicleStore(f"{args.dsn}?schema={schema}")  # the store makes its tables and save function
    store.close()
    table = f'"{schema}"."chronicle_events"'
    save = f'SELECT "{schema}"."{SAVE_FUNCTION}"(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[], %b)'
    trivial = f'"{schema}"."first_use_trivial"'
    found: dict[str, list[float]] = {}
    try:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE FUNCTION {trivial}(a int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN a + 1; END $$")
        for _ in range(args.connections):
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                found.setdefault("first read", []).append(timed(lambda: conn.execute(
                    f"SELECT * FROM {table} WHERE originator_id = %s LIMIT 1", (uuid.uuid4(),)).fetchall()))
                for label in ("save, first call", "save, second call"):
                    params = ([uuid.uuid4()], [1], ["first_use.Event"], [b"{}"], False)
                    found.setdefault(label, []).append(timed(lambda: conn.execute(save, params, prepare=True, binary=True).fetchone()))
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for label in ("trivial PL/pgSQL, first call", "trivial PL/pgSQL, second call"):
                    found.setdefault(label, []).append(timed(lambda: conn.execute(f"SELECT {trivial}(1)").fetchone()))
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    for label, times in found.items():
        print(f"{label:32} {statistics.median(times):6.2f} ms (median of {len(times)} new connections)")


if __name__ == "__main__":
    main()
