"""Two servers on one database post each reply once, on both backends: before it POSTs, an outbox
takes the turn's reply lease (a SessionLease under domain/ids.reply_lease_id), so of two that find
the same ended turn due, one sends it and the other passes it by; a lease whose holder died runs
out, and the reply is sent then. Driven with two store objects on the same database, as two
processes have, and with two real `chronicle serve` processes; and `serve` says at start which
routines' findings it posts, and to which channel."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from uuid import UUID

import httpx
import pytest

from chronicle.domain.ids import reply_lease_id
from chronicle.runtime.clock import Clock
from chronicle.runtime.leases import acquire, current_lease
from chronicle.runtime.server.channels import ChannelConfig, load_channels
from chronicle.runtime.server.outbox import REPLY_LEASE_S, Outbox, Outcome, due_replies
from chronicle.runtime.server.routing import Router
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.counting_store import CountingStore
from tests.helpers import cli, json_lines, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import outbox_looked_again, server_process, serving
from tests.server.test_channels import _started, receiver

CHECKLIST = "# Checklist\n- is the build green?\n"
DELIVERED = Outcome(True, 1, 200, None)


class HandClock(Clock):
    """A clock the test moves: a lease runs out when the test says so, not after a minute's wait."""

    def __init__(self) -> None:
        self.at = datetime.now(timezone.utc)

    def now(self) -> datetime:
        return self.at


def _ended_channel_turn(db: str, workspace: Path, tmp_path: Path) -> tuple[dict[str, ChannelConfig], UUID]:
    """A session whose channel input wants a reply, and its turn ended by a `chronicle worker`."""
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("disk is fine"))]])
    sid = _started(db, workspace, script)
    (workspace / "chronicle.toml").write_text(
        f'[channels.alerts]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "http://127.0.0.1:9/in?token=s3cret"\n')
    channels = load_channels(workspace / "chronicle.toml")
    store = ChronicleStore(db)
    try:
        Router(store).record("alerts", channels["alerts"], ["monitor"], "disk 91%")
    finally:
        store.close()
    ran = cli("worker", "--once", "--workspace", str(workspace), db=db)
    assert ran.returncode == 0, ran.stderr
    return channels, UUID(sid)


def _findings_of_a_routine(db: str, workspace: Path, tmp_path: Path) -> UUID:
    """A heartbeat run by `routines run` whose findings are due at channel ops."""
    script = write_script(tmp_path / "s.json", [], **{"routine-heartbeat": [[response(text("The build is red."))]]})
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    (workspace / "chronicle.toml").write_text(
        '[channels.ops]\nreply_url = "http://127.0.0.1:9/in"\n\n[routines.heartbeat]\nheartbeat = true\nnotify = "ops"\n')
    ran = cli("routines", "run", "heartbeat", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert ran.returncode == 0, ran.stderr
    return UUID(json_lines(ran.stdout)[0]["session_id"])


def _replies_recorded(store: ChronicleStore, sid: UUID) -> list[str]:
    return [type(e).__name__ for e in store.events.get(sid) if type(e).__name__ in ("ReplyDelivered", "ReplyFailed")]


@pytest.mark.parametrize("kind", ["answer", "findings"])
def test_two_outboxes_on_one_database_post_a_due_reply_once_and_record_it_once(db_url, workspace, tmp_path, kind):
    if kind == "answer":
        channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)
    else:
        sid = _findings_of_a_routine(db_url, workspace, tmp_path)
        channels = load_channels(workspace / "chronicle.toml")
    posts: list[dict[str, Any]] = []
    gate = threading.Event()

    def sender(url: str, payload: dict[str, Any]) -> Outcome:
        posts.append(payload)
        gate.wait(60)  # held until the other server has looked: both find the reply due meanwhile
        return DELIVERED

    first, second = ChronicleStore(db_url), ChronicleStore(db_url)  # as two processes would have them
    try:
        outboxes = [Outbox(store, channels, set(), sender=sender, workspace=workspace) for store in (first, second)]
        sent: dict[int, int] = {}
        runs = [threading.Thread(target=lambda i=i: sent.__setitem__(i, outboxes[i].pass_once())) for i in (0, 1)]
        runs[0].start()
        wait_for(lambda: posts, timeout=60)  # the first server is posting it
        runs[1].start()
        wait_for(lambda: len(posts) == 2 or not runs[1].is_alive(), timeout=60)  # the second posted it too, or passed it by
        gate.set()
        for run in runs:
            run.join(60)
        assert len(posts) == 1, posts
        assert sorted(sent.values()) == [0, 1]
        assert _replies_recorded(first, sid) == ["ReplyDelivered"]
        assert [outbox.pass_once() for outbox in outboxes] == [0, 0] and len(posts) == 1, "recorded: due no more"
        turn = UUID(posts[0]["turn_id"])
        lease = current_lease(second, sid, reply_lease_id(turn))
        assert lease is not None and lease.status == "held", "not released: the record settles the turn, the lease runs out"
    finally:
        gate.set()
        first.close()
        second.close()


def test_a_reply_found_due_before_another_server_recorded_it_is_not_sent_while_its_lease_holds_nor_after(db_url, workspace, tmp_path):
    """The other server recorded the reply and keeps its lease until it runs out: what was found due before
    is passed by while it holds, and read again, from the version it was found at, once it ran out."""
    channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)
    clock = HandClock()
    posts: list[dict[str, Any]] = []

    def sender(url: str, payload: dict[str, Any]) -> Outcome:
        posts.append(payload)
        return DELIVERED

    first, second = ChronicleStore(db_url), ChronicleStore(db_url)
    try:
        late = Outbox(second, channels, set(), sender=sender, clock=clock)
        [due] = due_replies(second, sid, channels)  # found due here ...
        assert Outbox(first, channels, set(), sender=sender, clock=clock).pass_once() == 1  # ... sent and recorded there
        assert late.deliver(due) is False and late.held_elsewhere, "the lease is still held there"
        clock.at += timedelta(seconds=REPLY_LEASE_S + 1)
        assert late.deliver(due) is False, "taken over once run out, and the record read then"
        assert len(posts) == 1 and _replies_recorded(second, sid) == ["ReplyDelivered"]
    finally:
        first.close()
        second.close()


def test_a_reply_costs_two_lease_events_in_one_write_and_no_release(db_url, workspace, tmp_path):
    """Created and Acquired, saved together; the reply's record settles the turn, so the lease is not
    released (a third event) but left to run out, and a second server still posts nothing."""
    channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)
    clock = HandClock()
    posts: list[dict[str, Any]] = []

    def sender(url: str, payload: dict[str, Any]) -> Outcome:
        posts.append(payload)
        return DELIVERED

    first, second = ChronicleStore(db_url), ChronicleStore(db_url)
    try:
        late = Outbox(second, channels, set(), sender=sender, clock=clock)
        [due] = due_replies(second, sid, channels)
        head = first.max_position()
        assert Outbox(first, channels, set(), sender=sender, clock=clock).pass_once() == 1
        key = reply_lease_id(due.turn_id)
        lease_events = [type(e).__name__ for e in first.events.get(key)]
        assert lease_events == ["Created", "Acquired"]
        written = [n.originator_id for n in first.recorder.select_notifications(head + 1, 100)]
        assert written.count(key) == 2 and written.count(sid) == 1, "the lease's two events and the reply's record"
        for _ in range(2):
            assert late.deliver(due) is False
            clock.at += timedelta(seconds=REPLY_LEASE_S + 1)
        assert len(posts) == 1
    finally:
        first.close()
        second.close()


def test_the_look_under_the_lease_reads_only_what_was_appended_since_the_reply_was_found_due(db_url, workspace, tmp_path):
    """No second load of the session: not from the cache, and not from the database when the cache let
    it go meanwhile (a cache of one aggregate here, as in a server looking at more sessions than it keeps)."""
    channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)
    store = CountingStore(db_url, env={"AGGREGATE_CACHE_MAXSIZE": "1"})
    at_post: dict[str, int] = {}

    def sender(url: str, payload: dict[str, Any]) -> Outcome:
        at_post.update(loads=store.loads["Session"], rows=store.rows_read[sid])
        return DELIVERED

    try:
        [due] = due_replies(store, sid, channels)
        assert store.rows_read[sid] > 5, "the first look read the session"
        store.loads.clear()
        store.rows_read.clear()
        assert Outbox(store, channels, set(), sender=sender).deliver(due) is True
        assert at_post == {"loads": 0, "rows": 0}, "nothing was appended since: nothing to read"
        assert _replies_recorded(store, sid) == ["ReplyDelivered"]
    finally:
        store.close()


def test_a_reply_whose_lease_another_server_holds_waits_until_the_lease_runs_out_then_is_sent_once(db_url, workspace, tmp_path):
    channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)
    clock = HandClock()
    posts: list[dict[str, Any]] = []

    def sender(url: str, payload: dict[str, Any]) -> Outcome:
        posts.append(payload)
        return DELIVERED

    store = ChronicleStore(db_url)
    try:
        [due] = due_replies(store, sid, channels)
        # A server on another machine took it and went silent: it is never presumed dead, its lease runs out.
        assert acquire(store, sid, "elsewhere.example:4242:abcdef", REPLY_LEASE_S, clock, key=reply_lease_id(due.turn_id))
        outbox = Outbox(store, channels, set(), sender=sender, clock=clock)
        assert outbox.pass_once() == 0 and posts == [], "held elsewhere: that server is sending it"
        clock.at += timedelta(seconds=REPLY_LEASE_S - 1)
        assert outbox.pass_once() == 0 and posts == []
        clock.at += timedelta(seconds=2)  # the lease ran out; the log has not moved since the last look
        assert outbox.pass_once() == 1 and len(posts) == 1
        assert posts[0]["turn_id"] == str(due.turn_id) and posts[0]["text"] == "disk is fine"
        assert _replies_recorded(store, sid) == ["ReplyDelivered"]
        assert outbox.pass_once() == 0 and len(posts) == 1
    finally:
        store.close()


def test_a_reply_whose_lease_a_process_of_this_machine_holds_is_sent_as_soon_as_that_process_is_gone(sqlite_url, workspace, tmp_path):
    channels, sid = _ended_channel_turn(sqlite_url, workspace, tmp_path)
    holder = processes.start([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    posts: list[dict[str, Any]] = []
    store = ChronicleStore(sqlite_url)
    try:
        [due] = due_replies(store, sid, channels)
        assert acquire(store, sid, f"{socket.gethostname()}:{holder.pid}:abcdef", REPLY_LEASE_S, key=reply_lease_id(due.turn_id))
        outbox = Outbox(store, channels, set(), sender=lambda url, payload: posts.append(payload) or DELIVERED)
        assert outbox.pass_once() == 0 and posts == [], "its holder lives: it is sending it"
        assert holder.stdin is not None
        holder.stdin.close()  # the holder ends, long before its lease would run out
        holder.wait(60)
        assert outbox.pass_once() == 1 and len(posts) == 1
        assert _replies_recorded(store, sid) == ["ReplyDelivered"]
    finally:
        processes.stop(holder)
        store.close()


def _log_events(base: str, sid: str, name: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == name]


def test_two_serve_processes_with_the_same_channel_post_a_turns_answer_once(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("deployed"))]])
    sid = _started(db_url, workspace, script)
    with receiver(delay_s=1.5) as (url, got):
        (workspace / "chronicle.toml").write_text(
            f'[channels.ci]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "{url}/in"\n')
        with serving(db_url, workspace, extra=("--no-worker",)) as base:
            assert httpx.post(f"{base}/hooks/ci", json={"text": "deploy", "sender": "ci-bot"}).status_code == 202
            wait_for(_log_events(base, sid, "InputQueued"), timeout=60)
        # Both servers watch the session from their start; the turn ends while both run, and both find it due.
        with serving(db_url, workspace, extra=("--no-worker",)) as one, serving(db_url, workspace, extra=("--no-worker",)) as two:
            ran = cli("worker", "--once", "--workspace", str(workspace), db=db_url)
            assert ran.returncode == 0, ran.stderr
            wait_for(_log_events(one, sid, "ReplyDelivered"), timeout=60)
            outbox_looked_again(one, two)  # a whole pass of both outboxes after the record: the other's POST would have arrived
            assert len(_log_events(one, sid, "ReplyDelivered")()) == 1
            assert len(_log_events(one, sid, "ReplyFailed")()) == 0
        assert len(got) == 1, got
        assert got[0]["json"]["text"] == "deployed" and got[0]["json"]["sender"] == "ci-bot"


def test_serve_says_at_start_which_routines_findings_it_posts_and_to_which_channel(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        '[channels.ops]\nreply_url = "http://127.0.0.1:9/in?token=s3cret-value"\n\n'
        '[channels.pager]\nreply_url = "http://127.0.0.1:9/page"\n\n'
        '[routines.heartbeat]\nheartbeat = true\nnotify = "ops"\n\n'
        '[routines.report]\ntrigger = "manual"\nprompt = "Report."\nnotify = "ops"\n\n'
        '[routines.quiet]\ntrigger = "manual"\nprompt = "Look."\n\n'
        '[routines.wake]\ntrigger = "manual"\nprompt = "Wake."\nnotify = "pager"\n')
    with server_process(sqlite_url, workspace) as (_, proc):
        pass
    said = proc.stderr.read() if proc.stderr else ""
    lines = [line for line in said.splitlines() if "notify" in line]
    assert lines == ["chronicle: notify: posting the findings of routines heartbeat, report to channel ops "
                     "(http://127.0.0.1:9/in?token=[REDACTED])",
                     "chronicle: notify: posting the findings of routine wake to channel pager (http://127.0.0.1:9/page)"], said
    assert "s3cret-value" not in said
    assert said.index("serving on") < said.index("notify:"), "said with the other start-up lines, after them"

    other = tmp_path / "other.toml"  # `--agents FILE`: the server's channels are FILE's, which lack pager
    other.write_text('[channels.ops]\nreply_url = "http://127.0.0.1:9/other"\n')
    with server_process(sqlite_url, workspace, extra=("--agents", str(other))) as (_, proc):
        pass
    said = proc.stderr.read() if proc.stderr else ""
    lines = [line for line in said.splitlines() if "notify" in line]
    assert lines == ["chronicle: notify: posting the findings of routines heartbeat, report to channel ops "
                     "(http://127.0.0.1:9/other)",
                     "notify: not posting the findings of wake: channel pager has no reply_url among this server's channels"], said

    (workspace / "chronicle.toml").write_text('[channels.ops]\nreply_url = "http://127.0.0.1:9/in"\n\n'
                                              '[routines.quiet]\ntrigger = "manual"\nprompt = "Look."\n')
    with server_process(sqlite_url, workspace) as (_, proc):
        pass
    said = proc.stderr.read() if proc.stderr else ""
    assert "serving on" in said and "notify" not in said, said


def test_serve_with_a_routine_whose_notify_names_no_channel_exits_2_naming_it(sqlite_url, workspace):
    (workspace / "chronicle.toml").write_text('[routines.report]\ntrigger = "manual"\nprompt = "Report."\nnotify = "nope"\n')
    refused = cli("serve", "--port", "0", "--workspace", str(workspace), db=sqlite_url)
    assert refused.returncode == 2, refused.stderr
    assert "routines.report: notify: no channel 'nope'" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert "serving on" not in refused.stderr
