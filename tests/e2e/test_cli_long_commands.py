"""Long commands at a terminal and in a pipe, on a store of 30,000 events: a progress bar while they work (at a
terminal only, never in a file, a pipe or --json), and Ctrl-C ending them with one line saying what was done and
what is left, exit 130 (typer's own handling exited 130 saying nothing).

Ctrl-C is sent mid-way for certain: once the bar shows the work under way the process is stopped (SIGSTOP), sent
SIGINT, and let go on (SIGCONT), so it cannot finish first however fast the machine is."""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests import processes
from tests.helpers import cli, json_lines
from tests.written_sessions import lookup_session, tool_turn

EVENTS = 30_000


def _build(url: str, workspace: Path) -> str:
    """One session of turns of 50 tool steps, written through the domain (as the bench builds its stores)."""
    from chronicle.runtime.store import ChronicleStore

    store = ChronicleStore(url)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    session = lookup_session(workspace, now)
    store.create_session(session)
    written, number, batch = 1, 0, []
    while written < EVENTS:
        number += 1
        now += timedelta(seconds=1)
        turn = tool_turn(session, number, 50, now)
        written += 3 + len(turn.pending_events)
        batch.append(turn)
        if len(batch) >= 20:
            store.save(session, *batch)
            batch = []
    store.save(session, *batch)
    store.close()
    return str(session.id)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, str]:
    """(a store of 30,000 events whose read models were never built, its session's id); copied by each test."""
    where = tmp_path_factory.mktemp("big")
    (where / "ws").mkdir()
    sid = _build(f"sqlite:///{where / 'chronicle.db'}", where / "ws")
    return where / "chronicle.db", sid


@pytest.fixture
def store(big, tmp_path) -> tuple[str, str]:
    path, sid = big
    shutil.copy(path, tmp_path / "chronicle.db")
    return f"sqlite:///{tmp_path / 'chronicle.db'}", sid


UNDER_WAY = re.compile(r"(\d+)/(\d+)")


def interrupted_at_a_terminal(url: str, *args: str, when: str = "bar") -> tuple[int, str]:
    """Run `chronicle ARGS` on a terminal; once it shows its work under way (`when="bar"`: a bar at neither end;
    else that text), Ctrl-C. (exit code, everything it wrote, escape sequences removed)."""
    main, side = pty.openpty()
    env = {**os.environ, "CHRONICLE_DB": url, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("CHRONICLE_DEBUG", None)
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdin=side, stdout=side,
                              stderr=side, env=env)
    os.close(side)
    seen: list[bytes] = []
    reader = threading.Thread(target=lambda: seen.append(processes.read_terminal(main)), daemon=True)
    shown = bytearray()

    def look() -> None:  # until the work is under way, then leave the rest to `reader`
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                return
            if not chunk:
                return
            shown.extend(chunk)
            text = _plain(shown.decode("utf-8", "replace"))
            if when == "bar":
                if any(0 < int(a) < int(b) for a, b in UNDER_WAY.findall(text)):
                    return
            elif when in text:
                return

    looker = threading.Thread(target=look, daemon=True)
    looker.start()
    looker.join(timeout=60)
    assert not looker.is_alive() and process.poll() is None, f"never under way: {_plain(shown.decode('utf-8', 'replace'))}"
    process.send_signal(signal.SIGSTOP)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGCONT)
    reader.start()
    code = process.wait(timeout=60)
    reader.join(timeout=10)
    return code, _plain((bytes(shown) + b"".join(seen)).decode("utf-8", "replace"))


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1].strip()


def test_ctrl_c_in_a_rebuild_says_where_the_read_models_are_left_and_the_next_command_finishes_them(store):
    url, _ = store
    assert cli("projections", "rebuild", db=url).returncode == 0
    code, shown = interrupted_at_a_terminal(url, "projections", "rebuild")
    assert code == 130, shown
    line = last_line(shown)
    found = re.fullmatch(r"interrupted: read models at position ([\d,]+) of ([\d,]+); they catch up at the next "
                         r"command that reads them, or `chronicle projections rebuild`", line)
    assert found, shown
    position, head = (int(n.replace(",", "")) for n in found.groups())
    assert position < head
    status = json_lines(cli("projections", "status", "--json", db=url).stdout)
    assert min(s["position"] for s in status) == position and {s["head"] for s in status} == {head}
    assert cli("audit", "--json", "--last", "1", db=url).returncode == 0  # a read catches them up
    assert {s["lag"] for s in json_lines(cli("projections", "status", "--json", db=url).stdout)} == {0}


def test_ctrl_c_in_verify_says_how_far_the_chain_was_checked_and_that_nothing_is_proven(store):
    url, _ = store
    code, shown = interrupted_at_a_terminal(url, "verify", "--all")
    assert code == 130, shown
    assert "checking the chain" in shown  # the bar, while it worked
    assert re.fullmatch(r"interrupted: verify stopped (after [\d,]+ of [\d,]+ links, no break among them|with the chain "
                        r"sound, after [\d,]+ of [\d,]+ snapshots); nothing was changed, and nothing is proven until a "
                        r"run reaches the end", last_line(shown)), shown


def test_ctrl_c_in_export_writes_nothing_and_says_so(store, tmp_path):
    url, sid = store
    out = tmp_path / "bundle.json"
    code, shown = interrupted_at_a_terminal(url, "export", sid, "-o", str(out))
    assert code == 130, shown
    assert last_line(shown) == f"interrupted: export stopped before the bundle was complete; nothing was written to {out}"
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if "bundle" in p.name] == []


def test_ctrl_c_in_doctor_says_how_far_it_read(store):
    url, _ = store
    code, shown = interrupted_at_a_terminal(url, "doctor")
    assert code == 130, shown
    assert re.fullmatch(r"interrupted: doctor stopped after [\d,]+ of [\d,]+ events; nothing was changed",
                        last_line(shown)), shown


def test_ctrl_c_in_projections_check_changes_nothing(store):
    url, _ = store
    assert cli("projections", "rebuild", db=url).returncode == 0
    code, shown = interrupted_at_a_terminal(url, "projections", "check")
    assert code == 130, shown
    assert last_line(shown).startswith("interrupted: projections check stopped before comparing every row; nothing was "
                                       "changed"), shown
    assert cli("projections", "check", db=url).returncode == 0


def test_ctrl_c_in_any_other_command_is_one_line_too(store):
    """`audit` knows no more than that it reads: the root's line, naming the command."""
    url, _ = store
    code, shown = interrupted_at_a_terminal(url, "audit", "--json", when="building the audit read model")
    assert code == 130, shown
    assert last_line(shown) == ("interrupted: `chronicle audit` stopped before it finished; it changes nothing, so "
                                "nothing is left half-done")


def test_no_bars_where_stderr_is_a_file_or_a_pipe_nor_with_json(store):
    url, _ = store
    assert cli("projections", "rebuild", db=url).returncode == 0  # built once: a later rebuild says only what it did
    rebuilt = cli("projections", "rebuild", db=url)
    assert rebuilt.returncode == 0
    assert rebuilt.stderr.splitlines() == [f"rebuilt {name} to position {_head(url)} (lag 0)"
                                           for name in ("history", "summaries", "cost", "audit")]
    both = subprocess.run(f"{sys.executable} -m chronicle.runtime.cli projections check --json 2>&1 | cat", shell=True,
                          capture_output=True, text=True, env={**os.environ, "CHRONICLE_DB": url}, timeout=120)
    assert [row["projection"] for row in json_lines(both.stdout)] == ["history", "summaries", "cost", "audit"]
    for args in (("verify", "--all"), ("doctor",)):
        done = cli(*args, db=url)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr)


def _head(url: str) -> int:
    """The log's head, which the rebuilt lines name."""
    return max(row["head"] for row in json_lines(cli("projections", "status", "--json", db=url).stdout))


def test_verify_and_export_show_a_bar_at_a_terminal(store, tmp_path):
    """Neither showed anything for the seconds they work on a large log."""
    url, sid = store
    for args, label in ((("verify", "--all"), "checking snapshots"),
                        (("export", sid, "-o", str(tmp_path / "b.json")), "checking the chain")):
        main, side = pty.openpty()
        process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdout=side, stderr=side,
                                  env={**os.environ, "CHRONICLE_DB": url, "COLUMNS": "120", "TERM": "xterm"})
        os.close(side)
        shown = _plain(processes.read_terminal(main).decode("utf-8", "replace"))
        assert process.wait(timeout=120) == 0, shown
        assert label in shown and re.search(r"\d+/\d+", shown), shown
    assert (tmp_path / "b.json").exists()


def test_status_of_read_models_never_built_reports_and_promises_nothing(store):
    """It warned four times that each read model was being built "once" from the log, and built none of them: a
    second status said the same lag (and nothing more)."""
    url, _ = store
    for _ in range(2):
        shown = cli("projections", "status", db=url)
        assert shown.returncode == 0 and "warning" not in shown.stderr and "building" not in shown.stderr, shown.stderr
        assert shown.stderr.splitlines() == [
            "not built yet: history, summaries, cost, audit; built at the next command that reads them (sessions, audit, "
            "cost, history --at), or `chronicle projections rebuild` with progress"]
        assert {row["position"] for row in json_lines(cli("projections", "status", "--json", db=url).stdout)} == {0}
    rebuilt = cli("projections", "rebuild", db=url)  # says what it builds; no warning that it is about to
    assert rebuilt.returncode == 0 and "warning" not in rebuilt.stderr and len(rebuilt.stderr.splitlines()) == 4
    after = cli("projections", "status", db=url)
    assert after.returncode == 0 and after.stderr == ""
