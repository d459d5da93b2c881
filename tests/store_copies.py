"""A source store built once per test module and backend, and a copy of it for each test that uses it.

Some fixtures record their sessions by running the real CLI several times (seconds a test, on each backend); the
tests then read, tamper with, import into or continue what was recorded. Building that once per module and handing
each test its own copy keeps every test apart (none sees another's writes: even a read catches up projections,
which writes) at a fraction of the cost:

- SQLite: the file, copied once the store is closed and its WAL checkpointed (and the WAL too, should one remain).
- PostgreSQL: the source lives in a database of its own, in a schema as `fresh_pg_url` makes; a copy is
  `CREATE DATABASE … TEMPLATE` of it, so the same schema with every table, sequence, function and schema mark
  exactly as built, under the same schema name (a store's DDL names its schema: a copied schema would not match its
  marks nor its save function). ≈ 0.05 s a copy here, against ≈ 1 s for one CLI run. PostgreSQL refuses a template
  that has connections: nothing connects to the source once it is built; the copies are dropped after the module.

Files made beside the store (keys, bundles) are copied into the test's own `tmp_path` under the same names. The
workspace the sessions were recorded with stays shared at its recorded path, and each test is checked to leave it
as it found it (`untouched_workspace`): a test that changes it needs a copy of its own.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

#: What conftest's `workspace` fixture holds, so a source recorded here sees the same workspace.
HELLO = "hello world\nsecond line\n"


class BuiltOnce:
    """One module's source store on one backend: `url` to build it, `copy(tmp_path)` for each test."""

    def __init__(self, backend: str, root: Path, request: pytest.FixtureRequest) -> None:
        self.backend = backend
        self.root = root
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        (self.workspace / "hello.txt").write_text(HELLO, encoding="utf-8")
        self._copies: list[str] = []
        self._admin: Any = None
        self._seen: dict[str, bytes] | None = None
        if backend == "sqlite":
            self._path = root / "chronicle.db"
            self.url = f"sqlite:///{self._path}"
            return
        import psycopg

        from tests.conftest import ADMIN_DSN, _with_db

        request.getfixturevalue("pg_database")  # skips, or fails under CHRONICLE_REQUIRE_PG=1, where PostgreSQL is not there
        self._dsn = ADMIN_DSN
        self._admin = psycopg.connect(ADMIN_DSN, autocommit=True)
        self._source = f"chronicle_src_{uuid.uuid4().hex[:12]}"
        self._admin.execute(f'CREATE DATABASE "{self._source}"')
        self._schema = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_with_db(ADMIN_DSN, self._source), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self._schema}"')
        self.url = f"{_with_db(ADMIN_DSN, self._source)}?schema={self._schema}"

    def sealed(self) -> None:
        """The build is over: every store on the source is closed. Note what the workspace holds now."""
        if self.backend == "sqlite":
            with closing(sqlite3.connect(self._path)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._seen = _contents(self.workspace)

    def copy(self, tmp_path: Path, *files: str) -> str:
        """A copy of the source store of this test's own (its URL), and `files` of the source's folder in `tmp_path`."""
        assert self._seen is not None, "copy() before sealed(): the source is still being built"
        for name in files:
            shutil.copy2(self.root / name, tmp_path / name)
        if self.backend == "sqlite":
            target = tmp_path / "chronicle.db"
            shutil.copy2(self._path, target)
            wal = self._path.with_name(self._path.name + "-wal")
            if wal.exists():  # empty after the checkpoint; copied all the same, never the -shm (SQLite rebuilds it)
                shutil.copy2(wal, target.with_name(target.name + "-wal"))
            return f"sqlite:///{target}"
        from tests.conftest import _with_db

        name = f"chronicle_copy_{uuid.uuid4().hex[:12]}"
        self._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._source}"')
        self._copies.append(name)
        return f"{_with_db(self._dsn, name)}?schema={self._schema}"

    def untouched_workspace(self) -> None:
        """Fail the test that changed the shared workspace (it needs a copy of its own)."""
        assert _contents(self.workspace) == self._seen, f"a test changed the shared workspace {self.workspace}"

    def close(self) -> None:
        """Drop the PostgreSQL databases, in a process of its own (conftest's `drop_database_later`): PostgreSQL
        checkpoints at every DROP DATABASE (≈ 0.2 s each on an idle server, seconds in a busy run), which no test
        need wait for."""
        if self._admin is None:
            return
        from tests.conftest import drop_database_later

        self._admin.close()
        drop_database_later(*self._copies, self._source)


def _contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


@contextmanager
def built_once(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[BuiltOnce]:
    """For a module-scoped fixture: a BuiltOnce on the backend `request.param` names. The body builds the source at
    `.url` (files beside it in `.root`, sessions recorded in `.workspace`) in the environment conftest gives a test
    (no API key, no CHRONICLE_DB); `copy` after the body. The PostgreSQL databases are dropped on leaving."""
    source = BuiltOnce(request.param, tmp_path_factory.mktemp(f"{name}-{request.param}"), request)
    try:
        with pytest.MonkeyPatch.context() as env:
            env.delenv("ANTHROPIC_API_KEY", raising=False)
            env.delenv("CHRONICLE_DB", raising=False)
            yield source
    finally:
        source.close()
