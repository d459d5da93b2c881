"""A worker whose PostgreSQL database goes away (dropped, renamed, its connections refused) says so
in seconds, once, with the server's reason, and takes up its work again when the database is back;
one dropped and created again (a restore) stops it with exit 1, saying why.

It said nothing for 55 s (ten retries, each waiting the pool's 5 s timeout), then
"store unavailable: couldn't get a connection after 5.00 sec", and the same again every minute.
test_connection_loss_pg.py cuts the network instead (a wait the worker rides out); this is a
refusal no wait cures, which only an operator's fix ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import closing

import psycopg

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.conftest import ADMIN_DSN, bring_database_back, own_database, take_database_away
from tests.helpers import cli, response, text
from tests.recovery import wait_for


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_worker_names_a_lost_database_at_once_and_works_again_when_it_is_back(pg_database, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("first")), response(text("second"))]}}))
    stderr = tmp_path / "worker.err"
    with own_database(pg_database, "chronicle_worker") as (name, url):
        env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": url}
        first = cli("submit", "one", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=url)
        assert first.returncode == 0, first.stderr
        with closing(ChronicleStore(url)) as store:
            sid = store.resolve_session_id(first.stdout.strip())
        with stderr.open("w") as err:
            worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.2"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        wait_for(lambda: any("turn" in line and "completed" in line for line in _lines(stderr)), timeout=60)
        take_database_away(name)
        lost = time.monotonic()
        refused = f'database "{name}" does not exist'

        def told() -> list[str]:  # (a connection the drop ended may be named first, in a line of its own)
            return [line for line in _lines(stderr) if "store unavailable" in line and refused in line]

        wait_for(told, timeout=30)
        assert time.monotonic() - lost < 15, f"told after {time.monotonic() - lost:.1f} s"
        assert not any("couldn't get a connection" in line for line in _lines(stderr)), _lines(stderr)
        time.sleep(2)  # ten looks for work, each refused: said once
        assert len(told()) == 1, _lines(stderr)

        bring_database_back(name)
        wait_for(lambda: any("store available again" in line for line in _lines(stderr)), timeout=30)
        second = cli("submit", "two", "--session", str(sid), db=url)
        assert second.returncode == 0, second.stderr
        wait_for(lambda: sum("completed" in line for line in _lines(stderr)) >= 2, timeout=60)
        with closing(ChronicleStore(url)) as store:
            assert [t.status for t in store.head_turns(store.session(sid))] == ["completed", "completed"]

        # Dropped and created again (a restore): no retry cures that, so the worker stops and says why, once.
        take_database_away(name)
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        assert worker.wait(timeout=60) == 1, _lines(stderr)
        replaced = [line for line in _lines(stderr) if "dropped and created again" in line]
        assert len(replaced) == 1 and "stopping: the database" in replaced[0], _lines(stderr)
