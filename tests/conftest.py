"""Real stores for every test: an SQLite file, and a fresh PostgreSQL database per test run.

PostgreSQL comes from the admin DSN in CHRONICLE_TEST_PG. If it cannot be reached the
PostgreSQL variants skip with a loud reason, unless CHRONICLE_REQUIRE_PG=1 (CI) makes them fail.
Each test gets its own schema, so tests never see each other's events.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse, urlunparse

import pytest

ADMIN_DSN = os.environ.get("CHRONICLE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("CHRONICLE_REQUIRE_PG") == "1"
#: Every event any test writes, in this process or a CLI it starts, must fit the stored vocabulary
#: (runtime/stored_vocabulary.py): a misfit is refused, so the test that wrote it fails there.
os.environ.setdefault("CHRONICLE_CHECK_EVENTS", "1")
LOOPBACK = ("127.", "::1", "localhost", "/")
#: Seconds a test's HTTP request to a server it started may take, where the test names none. httpx's own 5 s
#: was passed by a viewer page (0.2-1 s here) once on a CI machine running three workers and a browser on two
#: cores; a test checks what a server answers, not how fast (ops/ benchmarks time it). A request that waits
#: this long fails the test with the server's thread stacks (tests/server/serving.py).
HTTP_TIMEOUT_S = 30.0


def _patient_httpx() -> None:
    try:
        import httpx
    except ImportError:  # without the server extra no test makes a request
        return
    patient = httpx.Timeout(HTTP_TIMEOUT_S)
    # One TLS context for every client a test makes: httpx builds one per client (loading certifi's bundle, ≈ 20 ms
    # of CPU), and each `httpx.get` is a client, so the tests' polls of their plain-HTTP loopback servers spent a
    # tenth of their process's CPU building contexts (py-spy over the suite).
    shared = httpx.create_ssl_context()
    for function in (httpx.request, httpx.get, httpx.post, httpx.put, httpx.patch, httpx.delete, httpx.head,
                     httpx.options, httpx.stream, httpx.Client.__init__, httpx.AsyncClient.__init__):
        defaults = getattr(function, "__wrapped__", function).__kwdefaults__  # httpx.stream is a context manager
        if defaults and isinstance(defaults.get("timeout"), httpx.Timeout):
            defaults["timeout"] = patient
        if defaults and defaults.get("verify") is True:
            defaults["verify"] = shared


_patient_httpx()


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """No test reaches the internet: only loopback addresses and unix sockets may be dialled."""
    real_connect = socket.socket.connect

    def guarded(self, address):  # type: ignore[no-untyped-def]
        host = address[0] if isinstance(address, tuple) else str(address)
        if not str(host).startswith(LOOPBACK):
            raise RuntimeError(f"test tried to reach {host!r}; tests may only use loopback")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CHRONICLE_DB", raising=False)


def _with_db(dsn: str, dbname: str) -> str:
    parsed = urlparse(dsn)
    return urlunparse(parsed._replace(path=f"/{dbname}"))


@pytest.fixture(scope="session")
def pg_database():
    import psycopg

    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001
        message = f"PostgreSQL unreachable at {ADMIN_DSN}: {exc}"
        if REQUIRE_PG:
            pytest.fail(f"CHRONICLE_REQUIRE_PG=1 but {message}", pytrace=False)
        pytest.skip(f"!!! SKIPPING POSTGRESQL TESTS: {message} (set CHRONICLE_TEST_PG)")
    name = f"chronicle_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_db(ADMIN_DSN, name)
    finally:
        admin.close()
        drop_database_later(name)


#: Run by a process of its own: drops the databases its arguments name.
_DROP = """import sys, psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as admin:
    for name in sys.argv[2:]:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
"""


def drop_database_later(*names: str) -> None:
    """Drop the databases `names` in a process left to finish on its own. PostgreSQL makes every DROP DATABASE wait
    for an immediate checkpoint, which writes and syncs what every test wrote since the last one: in a busy run
    that took 4-18 s for the run's own database (at the end, by its last worker) and up to 40 s for one a test
    dropped, waits that tested nothing."""
    import subprocess
    import sys

    subprocess.Popen([sys.executable, "-c", _DROP, ADMIN_DSN, *names], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextmanager
def own_database(pg_database: str, prefix: str) -> Iterator[tuple[str, str]]:
    """A database of the test's own, for a test that takes it away (`take_database_away`): (name, URL). Dropped
    after the test, under its own name or the one it was taken away to (`drop_database_later`)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, pg_database.rsplit("/", 1)[0] + f"/{name}"
    finally:
        drop_database_later(name, f"{name}_away")


def take_database_away(name: str) -> None:
    """The database gone as a forced drop takes it, without the drop's wait for a checkpoint: new logins refused,
    its sessions ended, then renamed to `{name}_away`, so a client that logs in is told `database "name" does not
    exist`. `bring_database_back` undoes it."""
    import time

    import psycopg

    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        deadline = time.monotonic() + 30
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone():
            assert time.monotonic() < deadline, f"the sessions on {name} did not end"
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            time.sleep(0.02)
        admin.execute(f'ALTER DATABASE "{name}" RENAME TO "{name}_away"')


def bring_database_back(name: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}_away" RENAME TO "{name}"')
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


def terminate_backends(url: str) -> int:
    """Every backend on `url`'s database but this one's, ended by the server (as a failover or a restart ends them):
    a process's pooled connections, idle or busy, and its LISTEN connection. How many were ended."""
    import psycopg

    dbname = url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchone()
    return int(row[0]) if row else 0


def fresh_pg_url(base: str) -> str:
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{base}?schema={schema}"


@pytest.fixture
def proxied(pg_database):
    """(direct URL, URL through a cuttable proxy, the proxy) of a fresh PostgreSQL schema: a test
    cuts the proxy to lose the database as a restart or a broken network would."""
    from tests.pgproxy import CuttableProxy

    direct = fresh_pg_url(pg_database)
    proxy = CuttableProxy(urlparse(direct).hostname or "127.0.0.1", urlparse(direct).port or 5432)
    via_proxy = direct.replace(f":{urlparse(direct).port or 5432}/", f":{proxy.port}/", 1)
    yield direct, via_proxy, proxy
    proxy.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    """One test, both backends."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chronicle.db'}"
    return fresh_pg_url(request.getfixturevalue("pg_database"))


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'chronicle.db'}"


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\nsecond line\n", encoding="utf-8")
    return root


#: CHRONICLE_STORE_LEAKS=fail fails a test that leaves a store open (report:PATH lists them in PATH instead); by
#: default they are closed at its teardown. Not failing by default: many tests still open stores they never close
#: (harnesses and helpers that hold one; report: lists them), and closing them there is what matters for the run.
STORE_LEAKS = os.environ.get("CHRONICLE_STORE_LEAKS", "")


@pytest.fixture(autouse=True)
def stores_closed(request):
    """Every store a test opened is closed when it ends, on this thread, not left to the garbage collector: one
    collected later was finalised on its own pool's thread (eventsourcing's PostgresDatastore.__del__ cannot join
    that thread from itself), a warning in whichever test ran then (tests/store_leaks.py)."""
    from tests import closed_at_end, store_leaks

    watch = store_leaks.start()
    yield
    try:
        closed_at_end.close_all()  # what the test's harnesses and helpers opened for the whole test
    finally:
        left = store_leaks.stop(watch)
    if left and STORE_LEAKS.startswith("report:"):
        with open(STORE_LEAKS.removeprefix("report:"), "a", encoding="utf-8") as out:
            out.writelines(f"{request.node.nodeid}\t{line}\n" for line in left)
    elif left and STORE_LEAKS == "fail":
        pytest.fail(f"{request.node.nodeid} left {len(left)} store(s) open: " + "; ".join(left), pytrace=False)


@pytest.fixture(autouse=True)
def processes_ended():
    """Every process group the test started (tests/processes.py: `start`, and the CLI zygote's commands) is killed and
    its leader reaped when the test ends, passed or failed: a failing test left workers, servers and runs going."""
    from tests import processes

    yield
    processes.end_all()
