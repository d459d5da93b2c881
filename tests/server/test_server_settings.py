"""The server's worker settings and `ServerConfig.extra`: each used, or refused naming it (ChronicleError code 2 from
the library's entry, exit 2 from `chronicle serve`), never taken and dropped. Before, `extra` was read by nothing and
`worker_concurrency` was fixed at 4 for `serve` and did nothing without the server's worker."""

from __future__ import annotations

from contextlib import closing
from uuid import UUID

import httpx
import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import serving, sse, worker_looked_again, worker_status


def test_serve_concurrency_is_how_many_sessions_its_worker_advances_at_once(db_url, workspace, tmp_path):
    """Two sessions whose model answers only once a file exists: with --concurrency 1 the second waits for the first
    (the default 4 starts both at once)."""
    script = write_script(tmp_path / "s.json", [response(text("done"), until_file="open")])
    with serving(db_url, workspace, extra=("--concurrency", "1")) as base:
        ids = []
        for prompt in ("one", "two"):
            created = httpx.post(f"{base}/sessions", json={"prompt": prompt, "provider": f"scripted:{script}"})
            assert created.status_code == 201, created.text
            ids.append(UUID(created.json()["session_id"]))
        with closing(ChronicleStore(db_url)) as store:
            def started() -> list[UUID]:
                return [sid for sid in ids if store.session(sid).active_turn_id is not None]

            wait_for(started, timeout=30)
            # Two whole looks for work after the first session started: a second slot would have taken the other.
            worker_looked_again(base)
            assert len(started()) == 1
            assert worker_status(base)["in_hand"] == 1 and worker_status(base)["concurrency"] == 1
        (tmp_path / "open").write_text("", encoding="utf-8")
        for sid in ids:
            assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"


def test_serve_concurrency_with_no_worker_exits_2_naming_both_flags(db_url, workspace):
    run = cli("serve", "--no-worker", "--concurrency", "2", "--workspace", str(workspace), db=db_url)
    assert run.returncode == 2, (run.returncode, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--concurrency" in lines[0] and "--no-worker" in lines[0], run.stderr
    assert "chronicle worker --concurrency K" in lines[0]


@pytest.mark.parametrize("given,named", [
    ({"run_worker": False, "worker_concurrency": 2}, "worker_concurrency: this server runs no worker (run_worker is off)"),
    ({"worker_concurrency": 0}, "worker_concurrency: takes a whole number ≥ 1"),
    ({"worker_concurrency": True}, "worker_concurrency: takes a whole number ≥ 1"),
])
def test_the_librarys_server_refuses_a_worker_setting_it_would_not_use(sqlite_url, workspace, given, named):
    with pytest.raises(ChronicleError) as refused:
        Chronicle(sqlite_url).http_app(workspace=workspace, **given)
    assert refused.value.code == 2 and str(refused.value).startswith(named)


def test_server_config_extra_is_refused_naming_it_as_nothing_reads_it(sqlite_url, workspace):
    from chronicle.runtime.server.api import ServerConfig, create_app

    with pytest.raises(ChronicleError) as refused:
        create_app(ServerConfig(db=sqlite_url, workspace=workspace, extra={"cors": True}))
    assert refused.value.code == 2 and str(refused.value).startswith("ServerConfig.extra: the server reads no extra settings (cors)")
    create_app(ServerConfig(db=sqlite_url, workspace=workspace, extra={}, worker_concurrency=2)).state.chronicle.close()  # builds


def test_serve_drain_s_with_no_worker_exits_2_naming_both_flags(sqlite_url, workspace):
    run = cli("serve", "--no-worker", "--drain-s", "5", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 2, (run.returncode, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--drain-s" in lines[0] and "--no-worker" in lines[0], run.stderr


@pytest.mark.parametrize("given,named", [
    ({"run_worker": False, "drain_s": 5}, "drain_s: this server runs no worker (run_worker is off)"),
    ({"run_worker": False, "worker_log": print}, "worker_log: this server runs no worker (run_worker is off)"),
    ({"drain_s": -1}, "drain_s: takes a number of seconds ≥ 0"),
    ({"drain_s": float("inf")}, "drain_s: takes a number of seconds ≥ 0"),
    ({"drain_s": "30"}, "drain_s: takes a number of seconds ≥ 0"),
    ({"worker_log": "stderr"}, "worker_log: takes a function of one line (str), got str"),
])
def test_server_config_refuses_a_drain_or_worker_log_it_could_not_use(sqlite_url, workspace, given, named):
    from chronicle.runtime.server.api import ServerConfig, create_app

    with pytest.raises(ChronicleError) as refused:
        create_app(ServerConfig(db=sqlite_url, workspace=workspace, **given))
    assert refused.value.code == 2 and str(refused.value).startswith(named)
    create_app(ServerConfig(db=sqlite_url, workspace=workspace, drain_s=0, worker_log=print)).state.chronicle.close()  # builds
