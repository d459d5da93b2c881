"""`export -o FILE` writes the bundle whole or not at all: a disk that refuses the write mid-way (the kernel's
file-size limit, as test_cli_write_refused uses: write() fails with EFBIG as with ENOSPC) leaves the bundle that
was at FILE as it was, and no half-written file beside it. Before, the file was truncated first."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys

from tests.helpers import cli, json_lines, response, text


def test_a_refused_write_leaves_the_earlier_bundle_whole(sqlite_url, workspace, tmp_path):
    rnd = random.Random(3)  # words, not random bytes: the secret scan would cut high-entropy text down to a marker
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9))) for _ in range(5_000)]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text(" ".join(rnd.choice(words) for _ in range(150_000))))]}}))
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(run.stdout)[0]["session_id"]
    out = tmp_path / "bundles" / "session.json"
    out.parent.mkdir()
    assert cli("export", sid, "-o", str(out), db=sqlite_url).returncode == 0
    before = out.read_bytes()
    limit = len(before) // 2
    assert limit > 256_000  # room for the store's own small files (SQLite's -shm): only the bundle crosses the limit

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "CHRONICLE_DB": sqlite_url}
    again = subprocess.run([sys.executable, "-m", "chronicle.runtime.cli", "export", sid, "-o", str(out)], env=env,
                           preexec_fn=limited, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1, again.stderr
    assert again.stderr.startswith(f"error: cannot write {out}") and "Traceback" not in again.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["session.json"]
    assert cli("import", str(out), db=f"sqlite:///{tmp_path / 'other.db'}").returncode == 0
