"""Shared pieces of the benchmark: timing, fresh databases, commit counting, machine facts.

Benchmarks measure; they never assert. Each number is the median of repeated runs in this one
process tree, and comparisons are ratios of numbers taken in the same run, because the
absolute values on a shared 2-core machine move with whatever else is running.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

ADMIN_DSN = os.environ.get("CHRONICLE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgres")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def repeat(times: int, fn: Callable[[], float]) -> float:
    """Median of `times` runs of fn (which returns one measurement)."""
    return median([fn() for _ in range(max(1, times))])


@dataclass
class Plan:
    """What one invocation measures: `quick` keeps it under 3 minutes on 2 cores."""

    quick: bool
    steps: tuple[int, ...]
    repeats: dict[int, int]
    sections: tuple[str, ...]
    resume_sizes: tuple[int, ...]
    rebuild_events: int
    workers: tuple[int, ...]
    backends: tuple[str, ...] = BACKENDS
    notes: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, quick: bool, sections: tuple[str, ...], backends: tuple[str, ...] = BACKENDS) -> "Plan":
        if quick:
            return cls(True, (50, 200), {50: 3, 200: 2, 1000: 1}, sections, (1_000, 10_000), 20_000, (1, 2), backends)
        return cls(False, (50, 200, 1000), {50: 5, 200: 3, 1000: 1}, sections, (1_000, 10_000, 100_000), 100_000, (1, 2, 4), backends)


# -- databases ---------------------------------------------------------------------------------


class PgServer:
    """One fresh database for the whole run (dropped at the end); one schema per measurement."""

    def __init__(self, admin_dsn: str = ADMIN_DSN) -> None:
        import psycopg

        self.admin_dsn = admin_dsn
        self.admin = psycopg.connect(admin_dsn, autocommit=True, connect_timeout=3)
        self.dbname = f"chronicle_bench_{uuid.uuid4().hex[:10]}"
        self.admin.execute(f'CREATE DATABASE "{self.dbname}"')
        self.base = admin_dsn.rsplit("/", 1)[0] + f"/{self.dbname}"

    def close(self) -> None:
        self.admin.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
        self.admin.close()

    def new_schema(self) -> str:
        import psycopg

        schema = f"b_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return schema

    def xact_commits(self) -> int:
        """Committed transactions in the bench database so far (stats flush when backends go idle or exit)."""
        import psycopg

        time.sleep(0.7)
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self.dbname,)).fetchone()
        return int(row[0]) if row else 0

    def schema_bytes(self, schema: str) -> tuple[int, int]:
        """(total bytes on disk incl. indexes and TOAST, bytes of row payload) for every table in a schema."""
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute("ANALYZE")
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()]
            total = payload = 0
            for t in tables:
                q = f'"{schema}"."{t}"'
                total += conn.execute(f"SELECT pg_total_relation_size('{q}')").fetchone()[0]
                payload += conn.execute(f"SELECT COALESCE(SUM(pg_column_size(x.*)), 0) FROM {q} AS x").fetchone()[0]
        return int(total), int(payload)


@contextlib.contextmanager
def temp_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="chronicle-bench-") as d:
        yield Path(d)


def sqlite_bytes(path: Path) -> tuple[int, int]:
    """(file bytes after a checkpoint + VACUUM, bytes of row payload over every table)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        page = conn.execute("PRAGMA page_size").fetchone()[0] * conn.execute("PRAGMA page_count").fetchone()[0]
        payload = 0
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        for t in tables:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
            if cols:
                expr = " + ".join(f'COALESCE(LENGTH(CAST("{c}" AS BLOB)), 0)' for c in cols)
                payload += conn.execute(f'SELECT COALESCE(SUM({expr}), 0) FROM "{t}"').fetchone()[0]
        return int(page), int(payload)
    finally:
        conn.close()


class SqliteCommitCounter:
    """Counts COMMIT statements on every sqlite3 connection opened while installed.

    Installed by wrapping `sqlite3.connect` (eventsourcing and LangGraph both call it), so the
    count covers whatever the library does, including commits we did not expect.
    """

    def __init__(self) -> None:
        self.commits = 0
        self._real = sqlite3.connect

    def _trace(self, statement: str) -> None:
        if statement.lstrip()[:6].upper() == "COMMIT":
            self.commits += 1

    def __enter__(self) -> "SqliteCommitCounter":
        real = self._real

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real(*args, **kwargs)
            conn.set_trace_callback(self._trace)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        sqlite3.connect = self._real  # type: ignore[assignment]


class PgTransactionCounter:
    """Transactions the client opens on PostgreSQL: each top-level `Connection.transaction()`
    and each statement run in autocommit mode outside one (a transaction of its own).

    PostgreSQL's `xact_commit` counts those too, but also whatever else the database does in
    the same moment (other backends, the statistics collector's timing), so the bench reports
    both. Installed by wrapping psycopg's classes, which eventsourcing and LangGraph both use.
    """

    def __init__(self) -> None:
        self.transactions = 0
        #: Statements the client sent: each execute, and each parameter set of an executemany.
        self.statements = 0

    def __enter__(self) -> "PgTransactionCounter":
        import psycopg
        from psycopg.pq import TransactionStatus

        self._saved = (psycopg.Connection.transaction, psycopg.Cursor.execute, psycopg.Cursor.executemany)
        real_transaction, real_execute, real_executemany = self._saved
        counter = self

        def outside(conn: Any) -> bool:
            return bool(conn.info.transaction_status == TransactionStatus.IDLE)

        @contextlib.contextmanager
        def transaction(conn: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            counter.transactions += outside(conn)
            with real_transaction(conn, *args, **kwargs) as tx:
                yield tx

        def execute(cur: Any, *args: Any, **kwargs: Any) -> Any:
            counter.transactions += cur.connection.autocommit and outside(cur.connection)
            counter.statements += 1
            return real_execute(cur, *args, **kwargs)

        def executemany(cur: Any, query: Any, params_seq: Any, *args: Any, **kwargs: Any) -> Any:
            counter.transactions += cur.connection.autocommit and outside(cur.connection)
            params_seq = list(params_seq)
            counter.statements += len(params_seq)
            return real_executemany(cur, query, params_seq, *args, **kwargs)

        psycopg.Connection.transaction = transaction  # type: ignore[method-assign,assignment]
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        import psycopg

        psycopg.Connection.transaction, psycopg.Cursor.execute, psycopg.Cursor.executemany = self._saved  # type: ignore[method-assign]


# -- machine facts -----------------------------------------------------------------------------


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    pg = "?"
    try:
        import psycopg

        with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3) as conn:
            pg = conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:  # noqa: BLE001
        pg = f"unreachable ({exc.__class__.__name__})"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "sqlite": sqlite3.sqlite_version,
        "postgresql": pg,
        "load average at start": load,
        "chronicle commit": commit,
        **{d: version_of(d) for d in (
            "eventsourcing", "pydantic", "psycopg", "langgraph", "langgraph-checkpoint",
            "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "langchain-core",
        )},
    }


def now_ms() -> float:
    return time.perf_counter() * 1000


@dataclass
class Section:
    """One part of RESULTS.md: a heading, markdown lines (tables, notes) and the raw numbers."""

    key: str
    title: str
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def table(self, header: list[str], rows: list[list[Any]]) -> None:
        self.lines.append("| " + " | ".join(header) + " |")
        self.lines.append("|" + "|".join(" --- " for _ in header) + "|")
        for row in rows:
            self.lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
        self.lines.append("")

    def note(self, text: str) -> None:
        self.lines.append(text)
        self.lines.append("")

    def unavailable(self, reason: str) -> "Section":
        self.note(f"not available: {reason}")
        self.data["unavailable"] = reason
        return self


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:
            return "–"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


@dataclass
class Context:
    """What every section gets: the plan, the PostgreSQL server (or why there is none), a scratch dir."""

    plan: Plan
    pg: Any
    pg_missing: str
    scratch: Path
