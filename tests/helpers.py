"""Builders for scripts and a way to run the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests import cli_zygote, processes


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def response(*blocks: dict[str, Any], stop: str | None = None, usage: tuple[int, int] = (10, 5), **extra: Any) -> dict[str, Any]:
    has_tools = any(b["type"] == "tool_use" for b in blocks)
    return {
        "content": list(blocks),
        "stop_reason": stop or ("tool_use" if has_tools else "end_turn"),
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        **extra,
    }


def write_script(path: Path, main: list[Any], **agents: list[Any]) -> Path:
    path.write_text(json.dumps({"agents": {"main": main, **agents}}), encoding="utf-8")
    return path


def cli(*args: str, db: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `chronicle ARGS` as a user would, in a fresh process: forked from a zygote that has
    imported the CLI already (tests/cli_zygote.py), or started from scratch with
    CHRONICLE_TEST_FRESH=1 or when no zygote can run."""
    base = _base_env()
    full_env = {**base, **({"CHRONICLE_DB": db} if db else {}), **(env or {})}
    command = [sys.executable, "-m", "chronicle.runtime.cli", *args]
    forked = cli_zygote.run(command, list(args), cwd, full_env, timeout, input, zygote_env=base)
    if forked is not None:
        return forked
    return processes.run(command, cwd=cwd, env=full_env, timeout=timeout, input=input)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CHRONICLE_DB")}
    env["COLUMNS"] = "200"
    return env


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def same_value(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down, dict keys in the same order, NaN equal to NaN:
    what "decodes / converts / dumps exactly as the other does" means in the equivalence tests."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


@contextmanager
def sqlite_statements() -> Iterator[list[str]]:
    """The SQL text of every statement run on each sqlite3 connection opened inside the block, for as long as
    that connection lives (appended as they run: a store opened inside is traced after the block too);
    connections opened before it are not traced. `pg_statements` is PostgreSQL's counterpart."""
    import sqlite3

    seen: list[str] = []
    real = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    try:
        yield seen
    finally:
        sqlite3.connect = real  # type: ignore[assignment]


def pg_statements(run: Any) -> list[str]:
    """The SQL text of every statement psycopg executes while `run()` runs (no result is changed)."""
    import psycopg

    seen: list[str] = []
    real = psycopg.Cursor.execute

    def spy(cursor, query, *args, **kwargs):  # noqa: ANN001
        seen.append(query.as_string(cursor.connection) if hasattr(query, "as_string") else str(query))
        return real(cursor, query, *args, **kwargs)

    psycopg.Cursor.execute = spy  # type: ignore[method-assign]
    try:
        run()
    finally:
        psycopg.Cursor.execute = real  # type: ignore[method-assign]
    return seen


def recorded_sessions(app: Any) -> list[dict[str, Any]]:
    """`app.sessions(all=True)`, or none when there is no store: a first run refused before it recorded anything
    leaves no SQLite file behind (as `chronicle run` leaves none), and reading a store that is not there is an error."""
    from chronicle import ChronicleError

    try:
        return list(app.sessions(all=True))
    except ChronicleError as exc:
        if exc.code == 1 and str(exc).startswith("no Chronicle store at"):
            return []
        raise
