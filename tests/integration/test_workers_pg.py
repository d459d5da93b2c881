"""Several worker processes share one PostgreSQL; one is SIGKILLed midway; every input runs once.

Each input's turn appends a line naming the input to a shared file with bash (not idempotent)
and then answers. A line may be missing only where the killed worker died inside that bash
call (the tool call is then recorded as interrupted); no line may appear twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import lease_id
from chronicle.runtime.leases import current_lease
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from tests import processes
from tests.conftest import fresh_pg_url
from tests.helpers import response, text, tool_use
from tests.recovery import assert_recovered, wait_for

SESSIONS, INPUTS, WORKERS = 8, 3, 3


def test_workers_share_postgresql_and_a_killed_workers_sessions_are_finished_by_the_others(pg_database, tmp_path):
    db = fresh_pg_url(pg_database)
    store = ChronicleStore(db)
    runs = tmp_path / "runs.log"
    expected: dict[str, list[str]] = {}
    for s in range(SESSIONS):
        ws = tmp_path / f"ws{s}"
        ws.mkdir()
        script = tmp_path / f"s{s}.json"
        turns = [[response(tool_use(f"b{t}", "bash", command=f"sleep 0.1; echo s{s}-t{t} >> {runs}"), delay_s=0.05),
                  response(text(f"s{s} t{t} done"))] for t in range(INPUTS)]
        script.write_text(json.dumps({"agents": {"main": turns}}))
        spec = AgentSpec(provider=f"scripted:{script}", model="scripted", tools=DEFAULT_TOOLS, workspace=str(ws))
        session, _ = start_session(store, spec, "input 0")
        for t in range(1, INPUTS):
            submit_input(store, session.id, f"input {t}")
        expected[str(session.id)] = [f"input {t}" for t in range(INPUTS)]

    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["CHRONICLE_DB"] = db
    args = [sys.executable, "-m", "chronicle.runtime.cli", "worker", "--concurrency", "2", "--lease-s", "1.5",
            "--poll", "0.1", "--idle-exit", "2.5", "--yes"]
    workers = [processes.start(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(WORKERS)]
    try:
        def completed_turns() -> int:
            return sum(1 for sid in store.session_ids() for t in store.session(sid).turns if store.turn(t).status == "completed")

        def victim_holds_a_turn_in_flight() -> bool:
            for sid in store.session_ids():
                lease = current_lease(store, sid)
                session = store.session(sid)
                if (lease and lease.status == "held" and lease.holder and f":{workers[0].pid}:" in lease.holder
                        and session.active_turn_id is not None):
                    return True
            return False

        wait_for(lambda: completed_turns() >= 2, timeout=60, interval=0.02)
        wait_for(victim_holds_a_turn_in_flight, timeout=60, interval=0.01)
        workers[0].send_signal(signal.SIGKILL)
        for w in workers[1:]:
            w.wait(timeout=120)
    finally:
        for w in workers:
            processes.stop(w)
    for w in workers[1:]:
        err = w.stderr.read() if w.stderr else ""
        assert w.returncode == 0, err[-3000:]

    interrupted_lines = set()
    for sid_text, inputs in expected.items():
        sid = store.session_ids()[[str(s) for s in store.session_ids()].index(sid_text)]
        entries = assert_recovered(store, sid, turns=INPUTS)
        turns = [store.turn(t) for t in store.session(sid).turns]
        assert [t.input_text for t in turns] == inputs, "inputs of one session ran out of order"
        for e in entries:
            if e["aggregate"] == "tool_call" and e["event"] == "Interrupted":
                turn = next(t for t in turns if any(str(c.id) == e["aggregate_id"] for c in store.tool_calls_of(t)))
                interrupted_lines.add(f"s{list(expected).index(sid_text)}-t{turn.number - 1}")
    takeovers = [
        e for sid in store.session_ids() for _, e in store.events_with_positions([lease_id(sid)])
        if type(e).__name__ == "Acquired" and e.previous is not None
    ]
    assert takeovers, "no session held by the killed worker was taken over"
    lines = Counter(Path(runs).read_text().split())
    assert all(n == 1 for n in lines.values()), f"an input ran twice: {lines}"
    wanted = {f"s{s}-t{t}" for s in range(SESSIONS) for t in range(INPUTS)}
    assert wanted - set(lines) <= interrupted_lines
