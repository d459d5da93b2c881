"""The disk refuses a run's write in the middle of a turn (SQLite): the run says in one line that it lost
the store and how to continue, exit 1; what it had committed verifies; `resume` with room again
records the interruption, finishes the turn, and does not run the non-idempotent tool twice.

The refusal is the kernel's own: the run's process gets a file-size limit (RLIMIT_FSIZE, with SIGXFSZ
ignored, so write() fails with EFBIG as it fails with ENOSPC on a full disk) that the model's large
answer crosses. Passed from the start: kept as the promise it checks."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered

LIMIT = 600_000  # bytes any file of the run may grow to: the log's first step fits, the answer does not


def _limited() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_write_the_disk_refuses_mid_turn_is_one_line_and_resume_finishes_the_turn(sqlite_url, workspace, tmp_path):
    rnd = random.Random(7)  # words, not random bytes: the secret scan would cut high-entropy text down to a marker
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9))) for _ in range(20_000)]
    answer = " ".join(rnd.choice(words) for _ in range(300_000))  # ~2 MB, ~1 MB compressed
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(tool_use("b1", "bash", command="echo A >> side.txt")),
                                                      response(text(answer))]}}))
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": sqlite_url}
    run = subprocess.run([sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
                          "--workspace", str(workspace), "--yes"], env=env, preexec_fn=_limited, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stderr[-2000:]
    said = run.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: lost the event store") and "chronicle resume" in said[0], said
    assert cli("verify", "--all", db=sqlite_url).returncode == 0

    resumed = cli("resume", "--all", "--yes", db=sqlite_url, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    store = ChronicleStore(sqlite_url)
    sid = store.session_ids()[0]
    entries = assert_recovered(store, sid)
    assert [e["event"] for e in entries if e["aggregate"] == "turn" and e["event"] in ("Interrupted", "Resumed")] == ["Interrupted", "Resumed"]
    assert (workspace / "side.txt").read_text().splitlines() == ["A"]
    assert store.turn(store.session(sid).turns[0]).final_text == answer
    assert cli("verify", "--all", db=sqlite_url).returncode == 0
    store.close()
