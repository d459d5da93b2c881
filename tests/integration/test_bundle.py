"""export → import moves a session tree between stores intact; a tampered or wrongly signed bundle is refused."""

from __future__ import annotations

import base64
import json
from contextlib import closing
from pathlib import Path
from uuid import UUID

import pytest

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.store_copies import built_once
from tests.tamper import Tamper


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def exported_source(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A session that read a file, and its signed bundle: built once per backend (tests/store_copies.py)."""
    with built_once(request, tmp_path_factory, "exported") as source:
        script = write_script(source.root / "s.json", [
            response(text("Reading <b>it</b>."), tool_use("tu_1", "read_file", path="hello.txt")),
            response(text("It says hello & <script>alert(1)</script>.")),
        ])
        run = cli("run", "what is in hello.txt?", "--provider", f"scripted:{script}", "--workspace", str(source.workspace), "--json",
                  db=source.url)
        assert run.returncode == 0, run.stderr
        session = json_lines(run.stdout)[0]["session_id"]
        assert cli("keygen", str(source.root / "key.pem")).returncode == 0
        result = cli("export", session, "--out", str(source.root / "bundle.json"), "--sign", str(source.root / "key.pem"), db=source.url)
        assert result.returncode == 0, result.stderr
        source.sealed()
        yield source, session


@pytest.fixture
def exported(exported_source, tmp_path):  # type: ignore[no-untyped-def]
    """The exported session in a store of this test's own, the bundle and its key in `tmp_path`, and the workspace
    it was recorded in (shared: checked untouched)."""
    source, session = exported_source
    url = source.copy(tmp_path, "key.pem", "key.pem.pub", "bundle.json")
    yield url, session, tmp_path / "bundle.json", source.workspace
    source.untouched_workspace()


def fresh(tmp_path: Path, name: str = "target.db") -> str:
    return f"sqlite:///{tmp_path / name}"


def test_an_imported_session_reads_the_same_in_history_replay_audit_and_cost(exported, tmp_path):
    source, session, bundle, workspace = exported
    target = fresh(tmp_path)
    result = cli("import", str(bundle), "--key", str(tmp_path / "key.pem.pub"), "--json", db=target)
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    manifest = json.loads(bundle.read_text())["manifest"]
    assert imported["session_id"] == session and imported["events"] == manifest["counts"]["events"] > 0
    for args in (("history", session, "--json"), ("history", session, "--at", "1", "--json"), ("cost", session, "--json")):
        assert cli(*args, db=target).stdout == cli(*args, db=source).stdout, args
    audit = [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli("audit", "--json", db=target).stdout)]
    # The same trail, then the import's own row: where the bundle came from (tests/integration/test_bundle_owners.py).
    assert audit[:-1] == [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli("audit", "--json", db=source).stdout)]
    assert audit[-1]["kind"] == "import" and audit[-1]["session_id"] == session
    assert [s["session_id"] for s in json_lines(cli("sessions", "--json", db=target).stdout)] == [session]
    replay = cli("replay", session, "--workspace", str(workspace), db=target)
    assert replay.returncode == 0 and replay.stdout.startswith("identical"), replay.stdout + replay.stderr
    assert cli("verify", db=target).returncode == 0
    again = cli("import", str(bundle), db=target)
    assert again.returncode == 1 and "already holds" in again.stderr


def event_count(url: str) -> int:
    return len(Tamper(url).positions())


@pytest.mark.parametrize("tamper", ["edit a payload", "drop an event", "swap two events", "edit the manifest"])
def test_a_tampered_bundle_is_refused_and_nothing_is_recorded(exported, tmp_path, tamper):
    _source, _session, bundle, _workspace = exported
    data = json.loads(bundle.read_text())
    events = data["events"]
    if tamper == "edit a payload":
        state = bytearray(base64.b64decode(events[3]["state"]))
        state[len(state) // 2] ^= 0x01  # one bit, wherever it lands: stored states may be compressed, with no quote to edit
        events[3]["state"] = base64.b64encode(bytes(state)).decode()
    elif tamper == "drop an event":
        del events[3]
    elif tamper == "swap two events":
        events[2], events[4] = events[4], events[2]
    else:
        data["manifest"]["exported_at"] = "2020-01-01T00:00:00+00:00"
    bundle.write_text(json.dumps(data))
    target = fresh(tmp_path)
    ChronicleStore(target).close()  # the empty store (a read-only command no longer creates one)
    result = cli("import", str(bundle), db=target)
    assert result.returncode == 1 and "refused" in result.stderr and "nothing recorded" in result.stderr, result.stderr
    assert event_count(target) == 0


def test_a_bundle_signed_by_another_key_or_unsigned_is_refused_when_a_key_is_required(exported, tmp_path):
    source, session, bundle, _workspace = exported
    assert cli("keygen", str(tmp_path / "other.pem")).returncode == 0
    target = fresh(tmp_path)
    ChronicleStore(target).close()
    wrong = cli("import", str(bundle), "--key", str(tmp_path / "other.pem.pub"), db=target)
    assert wrong.returncode == 1 and "not by the --key given" in wrong.stderr
    unsigned = tmp_path / "unsigned.json"
    assert cli("export", session, "--out", str(unsigned), db=source).returncode == 0
    refused = cli("import", str(unsigned), "--key", str(tmp_path / "key.pem.pub"), db=target)
    assert refused.returncode == 1 and "not signed" in refused.stderr
    assert event_count(target) == 0


def test_history_renders_markdown_and_escaped_html(exported):
    source, session, _bundle, _workspace = exported
    md = cli("history", session, "--format", "md", db=source)
    assert md.returncode == 0 and "## assistant" in md.stdout and "**tool call** `read_file`" in md.stdout
    html = cli("history", session, "--format", "html", db=source).stdout
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "Reading &lt;b&gt;it&lt;/b&gt;." in html


def test_a_session_with_a_sub_agent_moves_with_its_child(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[agents.main]\ninstructions = "Lead."\n\n[agents.researcher]\n'
                                              'description = "Reads files"\n', encoding="utf-8")
    task = {"agent": "researcher", "task": "read hello.txt", "context": "the workspace has hello.txt"}
    script = write_script(tmp_path / "s.json",
                          [response(tool_use("d1", "delegate", tasks=[task])), response(text("The researcher says hello."))],
                          researcher=[response(tool_use("c1", "task_complete", status="completed", summary="it says hello"))])
    run = cli("run", "investigate", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    session = json_lines(run.stdout)[0]["session_id"]
    bundle = tmp_path / "tree.json"
    exported = cli("export", session, "-o", str(bundle), db=sqlite_url)  # -o: --out's short form
    counts = json.loads(bundle.read_text())["manifest"]["counts"]
    assert counts["sessions"] == 2
    assert exported.returncode == 0 and f": {counts['events']} events of 2 session(s), their leases left out, to " in exported.stdout
    # `verify SESSION` checks the sessions' leases too, and says how many of its events they are: the rest is the bundle.
    checked = json.loads(cli("verify", session, "--json", db=sqlite_url).stdout)
    assert checked["leases"] > 0 and checked["events"] - checked["leases"] == counts["events"], checked
    said = cli("verify", session, db=sqlite_url).stdout
    assert (f"{checked['leases']} of its {checked['events']} events are its sessions' leases, which `export` leaves out "
            f"(it carries {counts['events']})") in said, said
    target = fresh(tmp_path)
    assert cli("import", str(bundle), db=target).returncode == 0
    there = json.loads(cli("verify", session, "--json", db=target).stdout)
    assert (there["events"], there["leases"]) == (counts["events"], 0)
    for args in (("sessions", "--json"), ("cost", session, "--json"), ("log", session, "--tree", "--json")):
        source_out = [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli(*args, db=sqlite_url).stdout)]
        target_out = [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli(*args, db=target).stdout)]
        assert target_out == source_out, args


def test_attachments_travel_with_the_session_and_are_not_duplicated(sqlite_url, workspace, tmp_path):
    from chronicle import Agent, Chronicle
    from chronicle.runtime.attachments import load_data

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24 + b"not really pixels"
    script = write_script(tmp_path / "s.json", [[response(text("A chart."))], [response(text("The same chart."))]])
    app = Chronicle(sqlite_url)
    agent = Agent(name="main", provider=f"scripted:{script}")
    first = app.run_sync(agent, "What is this?", workspace=workspace, attachments=[(png, "image/png")])
    second = app.run_sync(agent, "And this?", workspace=workspace, attachments=[(png, "image/png")])
    assert first.status == second.status == "completed"
    app.close()
    target = fresh(tmp_path)
    for n, result in enumerate((first, second)):
        bundle = tmp_path / f"b{n}.json"
        assert cli("export", result.session_id, "--out", str(bundle), db=sqlite_url).returncode == 0
        assert json.loads(bundle.read_text())["manifest"]["counts"]["attachments"] == 1
        imported = cli("import", str(bundle), db=target)
        assert imported.returncode == 0, imported.stderr  # the second finds the attachment already there
        args = ("history", result.session_id, "--json")
        assert cli(*args, db=target).stdout == cli(*args, db=sqlite_url).stdout
    from chronicle.runtime.store import ChronicleStore

    sha = json_lines(cli("history", first.session_id, "--json", db=target).stdout)[0]["content"][0]["source"]["sha256"]
    with closing(ChronicleStore(target)) as there:
        assert base64.b64decode(load_data(there, sha)) == png


# -- forks: a bundle carries the turns a fork inherits -------------------------------------------


def other_store(db_url: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> str:
    """A second, empty store on the backend `db_url` is on."""
    if db_url.startswith("sqlite"):
        return fresh(tmp_path, f"{name}.db")
    from tests.conftest import fresh_pg_url

    return fresh_pg_url(request.getfixturevalue("pg_database"))


def without(rows: list[dict], *keys: str) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in keys} for row in rows]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def forked_source(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A three-turn session S (turn 1 reads a file), F forked from it at turn 2 with one turn of its
    own, and G forked from S at turn 1: built once per backend (tests/store_copies.py)."""
    with built_once(request, tmp_path_factory, "forked") as source:
        db_url, workspace = source.url, source.workspace
        script = write_script(source.root / "s.json", [
            [response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")), response(text("It says hello."))],
            [response(text("Second answer."))],
            [response(text("Third answer, never seen by the forks."))],
        ])
        provider = ("--provider", f"scripted:{script}", "--workspace", str(workspace))
        first = cli("run", "what is in hello.txt?", *provider, "--json", db=db_url)
        assert first.returncode == 0, first.stderr
        session = json_lines(first.stdout)[0]["session_id"]
        for prompt in ("and then?", "and finally?"):
            assert cli("run", prompt, "--session", session, *provider, db=db_url).returncode == 0
        fork = cli("fork", session, "--at", "2", db=db_url).stdout.strip()
        own = write_script(source.root / "f.json", [[], [], [response(text("The fork's own answer."))]])  # its turn 3
        assert cli("run", "on the fork", "--session", fork, "--provider", f"scripted:{own}", "--workspace", str(workspace),
                   db=db_url).returncode == 0
        other = cli("fork", session, "--at", "1", db=db_url).stdout.strip()
        source.sealed()
        yield source, (session, fork, other, provider)


@pytest.fixture
def forked(forked_source, tmp_path):  # type: ignore[no-untyped-def]
    """The forked sessions in a store of this test's own; `provider[-1]` is the workspace they were recorded in
    (shared: checked untouched)."""
    source, (session, fork, other, provider) = forked_source
    yield source.copy(tmp_path), session, fork, other, provider
    source.untouched_workspace()


def export(db_url: str, session: str, path: Path) -> dict:
    result = cli("export", session, "-o", str(path), db=db_url)
    assert result.returncode == 0, result.stderr
    return json.loads(path.read_text())


def test_an_imported_fork_shows_continues_and_replays_what_it_inherited(forked, tmp_path, request):
    source, session, fork, _other, provider = forked
    bundle = export(source, fork, tmp_path / "fork.json")
    assert bundle["manifest"]["format"] == "chronicle-bundle/2" and bundle["manifest"]["sessions"] == [fork]
    assert bundle["manifest"]["inherited_from"] == [session] and bundle["manifest"]["inherited"]
    target = other_store(source, tmp_path, request, "target")
    imported = cli("import", str(tmp_path / "fork.json"), "--json", db=target)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["events"] == bundle["manifest"]["counts"]["events"]
    for args in (("history", fork, "--json"), ("history", fork, "--at", "1", "--json"), ("history", fork, "--at", "2", "--json"),
                 ("history", fork, "--at", "3", "--json"), ("history", fork, "--at", "1", "--step", "1", "--json"),
                 ("cost", fork, "--json")):
        shown = cli(*args, db=target)
        assert shown.returncode == 0 and shown.stdout == cli(*args, db=source).stdout, (args, shown.stderr)
    said = [b.get("text") for m in json_lines(cli("history", fork, "--json", db=target).stdout) for b in m["content"]]
    assert "It says hello." in said and "Third answer, never seen by the forks." not in said
    audit = without(json_lines(cli("audit", "--session", fork, "--json", db=target).stdout), "position")
    assert audit[:-1] == without(json_lines(cli("audit", "--session", fork, "--json", db=source).stdout), "position") and audit
    assert audit[-1]["kind"] == "import" and audit[-1]["detail"]["session_ids"] == [fork]
    listed = json_lines(cli("sessions", "--json", db=target).stdout)
    assert [s["session_id"] for s in listed] == [fork] and listed[0]["turns"] == 3
    replay = cli("replay", fork, "--workspace", provider[-1], db=target)
    assert replay.returncode == 0 and replay.stdout.startswith("identical: 3 turn(s)"), replay.stdout + replay.stderr
    for scope in ((), (fork,)):
        checked = cli("verify", *scope, db=target)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    more = write_script(tmp_path / "more.json", [[]] * 3 + [[response(text("Continued in the new store."))]])
    continued = cli("run", "once more", "--session", fork, "--provider", f"scripted:{more}", "--workspace", provider[-1], db=target)
    assert continued.returncode == 0, continued.stderr
    said = [b.get("text") for m in json_lines(cli("history", fork, "--json", db=target).stdout) for b in m["content"]]
    assert said[:2] == ["what is in hello.txt?", "Reading."] and said[-1] == "Continued in the new store."


def test_an_imported_fork_says_the_session_it_was_forked_from_is_not_in_this_store(forked, tmp_path, request):
    source, session, fork, _other, _provider = forked
    export(source, fork, tmp_path / "fork.json")
    target = other_store(source, tmp_path, request, "target")
    assert cli("import", str(tmp_path / "fork.json"), db=target).returncode == 0
    missing = f"forked from {session} at turn 2 (not in this store)"
    listed = cli("sessions", db=target)
    assert listed.returncode == 0 and f"{fork[:8]} {missing}" in listed.stdout, listed.stdout
    for args in (("history", fork), ("log", fork), ("log", fork, "--tree")):
        shown = cli(*args, db=target)
        assert shown.returncode == 0 and missing in shown.stderr, (args, shown.stderr)
    checked = cli("verify", fork, db=target)
    assert checked.returncode == 0 and f"inherited from the session it was forked from: {session} (not in this store)" in checked.stdout
    verdict = json.loads(cli("verify", fork, "--json", db=target).stdout)
    assert (verdict["inherited_from"], verdict["origins_not_here"]) == ([session], [session])
    # In the store it was made in, its origin is there and nothing says otherwise.
    assert "not in this store" not in cli("sessions", db=source).stdout
    here = cli("history", fork, db=source)
    assert f"forked from {session} at turn 2" in here.stderr and "not in this store" not in here.stderr
    assert "not in this store" not in cli("verify", fork, db=source).stdout


def test_forks_import_beside_their_parent_in_any_order_and_nothing_is_held_twice(forked, tmp_path, request):
    source, session, fork, other, _provider = forked
    bundles = {name: tmp_path / f"{name}.json" for name in ("parent", "fork", "other")}
    for name, sid in (("parent", session), ("fork", fork), ("other", other)):
        export(source, sid, bundles[name])
    for order in (("fork", "parent", "other"), ("parent", "other", "fork")):
        target = other_store(source, tmp_path, request, "-".join(order))
        for name in order:
            result = cli("import", str(bundles[name]), db=target)
            assert result.returncode == 0, (order, name, result.stderr)
        for sid in (session, fork, other):
            args = ("history", sid, "--json")
            assert cli(*args, db=target).stdout == cli(*args, db=source).stdout, (order, sid)
        # Every event of the three sessions once, their three index entries and the three imports' entries
        # in the import log (runtime/import_log.py): nothing twice.
        tamper = Tamper(target)
        held = [(str(oid), version) for oid, version, _topic, _state in (tamper.event(p) for p in tamper.positions())]
        wanted = {(e["originator_id"], e["version"]) for b in bundles.values() for e in json.loads(b.read_text())["events"]}
        assert len(held) == len(set(held)) == len(wanted) + 6 and set(held) >= wanted
        again = cli("import", str(bundles[order[0]]), db=target)
        assert again.returncode == 1 and "already holds" in again.stderr, again.stderr
        assert cli("verify", db=target).returncode == 0


def test_a_fork_bundle_of_the_old_format_without_its_inherited_turns_is_refused_unless_the_store_holds_them(forked, tmp_path,
                                                                                                            request):
    source, session, fork, _other, _provider = forked
    old = tmp_path / "old.json"
    old.write_text(json.dumps(as_format_1(export(source, fork, tmp_path / "fork.json"))))
    target = other_store(source, tmp_path, request, "target")
    refused = cli("import", str(old), db=target)
    assert refused.returncode == 1 and "inherits" in refused.stderr and "nothing recorded" in refused.stderr, refused.stderr
    assert event_count(target) == 0
    export(source, session, tmp_path / "parent.json")
    assert cli("import", str(tmp_path / "parent.json"), db=target).returncode == 0
    accepted = cli("import", str(old), db=target)
    assert accepted.returncode == 0, accepted.stderr
    args = ("history", fork, "--json")
    assert cli(*args, db=target).stdout == cli(*args, db=source).stdout


def as_format_1(bundle: dict) -> dict:
    """The bundle as the export of chronicle-bundle/1 wrote it: the fork's own events alone, no `inherited`."""
    from chronicle.runtime.bundle import _digest
    from chronicle.runtime.chain import GENESIS
    from chronicle.runtime.chain_reader import RawEvent

    manifest = dict(bundle["manifest"])
    inherited = set(manifest.pop("inherited"))
    manifest.pop("inherited_from")
    manifest["format"] = "chronicle-bundle/1"
    events, prev = [], GENESIS
    for i, entry in enumerate((e for e in bundle["events"] if e["originator_id"] not in inherited), start=1):
        raw = RawEvent(entry["position"], UUID(entry["originator_id"]), entry["version"], entry["topic"],
                       base64.b64decode(entry["state"]))
        prev = _digest(prev, i, raw)
        events.append({**entry, "i": i, "digest": prev.hex()})
    manifest["counts"] = {**manifest["counts"], "events": len(events), "aggregates": len({e["originator_id"] for e in events})}
    manifest["counts"].pop("inherited", None)
    manifest["head"] = prev.hex()
    return {"manifest": manifest, "events": events, "signature": None}


def test_a_bundle_written_by_the_first_format_still_imports(exported, tmp_path):
    source, session, bundle, _workspace = exported
    data = json.loads(bundle.read_text())
    old = tmp_path / "old.json"
    old.write_text(json.dumps(as_format_1(data)))
    target = fresh(tmp_path)
    result = cli("import", str(old), db=target)
    assert result.returncode == 0, result.stderr
    args = ("history", session, "--json")
    assert cli(*args, db=target).stdout == cli(*args, db=source).stdout


# -- the task board travels with its session ------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def delegating_source(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A session with a task posted on its board and claimed by a researcher that fails it (so it
    carries a reflection), a task posted and never claimed, and a task its delegate call opened
    for an auditor that completes it: built once per backend (tests/store_copies.py)."""
    with built_once(request, tmp_path_factory, "delegating") as source:
        db_url, workspace = source.url, source.workspace
        (workspace / "chronicle.toml").write_text(
            '[agents.main]\ninstructions = "Lead."\n\n[agents.researcher]\ndescription = "Reads files"\n\n'
            '[agents.auditor]\ndescription = "Checks"\n', encoding="utf-8")
        first = write_script(source.root / "first.json", [[response(text("Ready."))]])
        provider = ("--workspace", str(workspace))
        run = cli("run", "get ready", "--provider", f"scripted:{first}", *provider, "--json", db=db_url)
        assert run.returncode == 0, run.stderr
        session = json_lines(run.stdout)[0]["session_id"]
        posted = json.loads(cli("tasks", "add", session, "find the missing config file", "--agent", "researcher", "--json",
                                db=db_url).stdout)["task_id"]
        idle = cli("tasks", "add", session, "tidy the notes later", db=db_url)
        assert idle.returncode == 0, idle.stderr
        items = [{"agent": "researcher", "task": "find the missing config file", "task_id": posted},
                 {"agent": "auditor", "task": "check hello.txt"}]
        second = write_script(source.root / "second.json",
                              [[], [response(tool_use("d1", "delegate", tasks=items)), response(text("One failed."))]],
                              researcher=[response(tool_use("r1", "task_complete", status="failed", summary="the config file is missing"))],
                              auditor=[response(tool_use("a1", "task_complete", status="completed", summary="hello.txt is fine"))])
        run = cli("run", "delegate it", "--session", session, "--provider", f"scripted:{second}", *provider, db=db_url)
        assert run.returncode == 0, run.stderr
        rows = json_lines(cli("tasks", session, "--json", db=db_url).stdout)
        assert [(r["status"], r["posted"]) for r in rows] == [("failed", True), ("pending", True), ("completed", False)], rows
        assert rows[0]["reflection"]
        source.sealed()
        yield source, session


@pytest.fixture
def delegating(delegating_source, tmp_path):  # type: ignore[no-untyped-def]
    """The delegating session in a store of this test's own."""
    source, session = delegating_source
    yield source.copy(tmp_path), session
    source.untouched_workspace()


def task_rows(url: str, session: str) -> list[dict]:
    return [e for e in json_lines(cli("audit", "--session", session, "--json", db=url).stdout) if e["kind"] in ("task", "reflection")]


@pytest.mark.parametrize("target_backend", ["same", "postgresql"])
def test_a_delegating_sessions_task_board_and_reflections_move_with_it(delegating, tmp_path, request, target_backend):
    from chronicle.runtime.task_board import prior_reflections

    source, session = delegating
    if target_backend == "postgresql" and not source.startswith("sqlite"):
        pytest.skip("SQLite to PostgreSQL: the same-backend case covers PostgreSQL to PostgreSQL")
    target = (other_store("postgresql", tmp_path, request, "target") if target_backend == "postgresql"
              else other_store(source, tmp_path, request, "target"))
    bundle = export(source, session, tmp_path / "board.json")
    assert sum(1 for e in bundle["events"] if "DelegatedTask" in e["topic"]) > 0
    imported = cli("import", str(tmp_path / "board.json"), db=target)
    assert imported.returncode == 0, imported.stderr
    tasks = ("tasks", session, "--json")
    assert cli(*tasks, db=target).stdout == cli(*tasks, db=source).stdout
    assert len(json_lines(cli(*tasks, db=target).stdout)) == 3
    assert without(task_rows(target, session), "position") == without(task_rows(source, session), "position")
    assert task_rows(target, session)
    with closing(ChronicleStore(target)) as there, closing(ChronicleStore(source)) as here:
        offered = prior_reflections(there, "find the config file")
        assert offered and offered == prior_reflections(here, "find the config file")
    assert cli("verify", session, db=target).returncode == 0


def test_verify_session_detects_a_tampered_task_event(delegating):
    db_url, session = delegating
    assert cli("verify", session, db=db_url).returncode == 0
    task = json_lines(cli("tasks", session, "--json", db=db_url).stdout)[2]["task_id"]  # the auditor's, completed
    tamper = Tamper(db_url)
    position = next(p for p in reversed(tamper.positions()) if tamper.event(p)[0] == UUID(task))  # its Completed
    state = bytearray(tamper.event(position)[3])
    state[len(state) // 2] ^= 0x01  # a forged summary, one bit of it: stored states may be compressed
    tamper.set_state(position, bytes(state))
    result = cli("verify", session, db=db_url)
    assert result.returncode != 0, result.stdout + result.stderr


def without_tasks(bundle: dict) -> dict:
    """The bundle as chronicle-bundle/2 was written before bundles carried task boards: no DelegatedTask events."""
    from chronicle.runtime.bundle import _digest
    from chronicle.runtime.chain import GENESIS
    from chronicle.runtime.chain_reader import RawEvent

    manifest = dict(bundle["manifest"])
    events, prev = [], GENESIS
    for i, entry in enumerate((e for e in bundle["events"] if "DelegatedTask" not in e["topic"]), start=1):
        raw = RawEvent(entry["position"], UUID(entry["originator_id"]), entry["version"], entry["topic"],
                       base64.b64decode(entry["state"]))
        prev = _digest(prev, i, raw)
        events.append({**entry, "i": i, "digest": prev.hex()})
    manifest["counts"] = {**manifest["counts"], "events": len(events), "aggregates": len({e["originator_id"] for e in events})}
    manifest["head"] = prev.hex()
    return {"manifest": manifest, "events": events, "signature": None}


def test_a_bundle_written_before_bundles_carried_tasks_imports_with_an_empty_board(delegating, tmp_path, request):
    source, session = delegating
    data = export(source, session, tmp_path / "board.json")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(without_tasks(data)))
    target = other_store(source, tmp_path, request, "target")
    result = cli("import", str(old), db=target)
    assert result.returncode == 0, result.stderr
    assert json_lines(cli("tasks", session, "--json", db=target).stdout) == []
    args = ("history", session, "--json")
    assert cli(*args, db=target).stdout == cli(*args, db=source).stdout


def test_log_shows_the_boards_task_events_in_commit_order(delegating):
    db_url, session = delegating
    entries = json_lines(cli("log", session, "--json", db=db_url).stdout)
    assert [e["position"] for e in entries] == sorted(e["position"] for e in entries)
    tasks = [e for e in entries if e["aggregate"] == "task"]
    listed = {r["task_id"] for r in json_lines(cli("tasks", session, "--json", db=db_url).stdout)}
    assert {e["aggregate_id"] for e in tasks} == listed
    assert [e["event"] for e in tasks if e["event"] in ("Posted", "Opened")].count("Posted") == 2
    failed = [e for e in tasks if e["status"] == "failed"]
    assert failed and failed[-1]["event"] == "ReflectionRecorded"


def test_a_bundle_posting_a_task_on_a_board_outside_it_is_refused(delegating, tmp_path, request):
    """Import writes board index entries from the task events: one naming a session the bundle does not
    carry would put a task on a board of the target's own. `export` never writes one; a forged bundle is refused."""
    from uuid import uuid4

    source, session = delegating
    data = export(source, session, tmp_path / "board.json")
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(posted_elsewhere(source, data, uuid4())))
    target = other_store(source, tmp_path, request, "target")
    result = cli("import", str(path), db=target)
    assert result.returncode == 1 and "not in the bundle" in result.stderr and "nothing recorded" in result.stderr, result.stderr
    assert json_lines(cli("sessions", "--json", db=target).stdout) == []


def posted_elsewhere(source: str, data: dict, board: UUID) -> dict:
    """The bundle with every posted task moved to `board`, and its chain redone over the edited states, as a forger would."""
    store = ChronicleStore(source)
    entries = [dict(entry) for entry in data["events"]]
    for entry in entries:
        if entry["topic"].endswith("DelegatedTask.Posted"):
            raw = store.recorder.select_events(UUID(entry["originator_id"]), limit=1)[0]
            event = store.mapper.to_domain_event(raw)
            object.__setattr__(event, "parent_session_id", board)
            entry["state"] = base64.b64encode(store.mapper.to_stored_event(event).state).decode()
    store.close()
    return rechained(data, entries)


def rechained(data: dict, entries: list[dict]) -> dict:
    """The bundle with `entries` as its events and its own chain redone over them, unsigned: what a forger holding an
    unsigned bundle writes after editing events."""
    from chronicle.runtime.bundle import _digest
    from chronicle.runtime.chain import GENESIS
    from chronicle.runtime.chain_reader import RawEvent

    prev, events = GENESIS, []
    for i, entry in enumerate(entries, start=1):
        prev = _digest(prev, i, RawEvent(entry["position"], UUID(entry["originator_id"]), entry["version"], entry["topic"],
                                         base64.b64decode(entry["state"])))
        events.append({**entry, "digest": prev.hex()})
    return {"manifest": {**data["manifest"], "head": prev.hex()}, "events": events, "signature": None}


def verified_events(url: str, session: str) -> int:
    result = cli("verify", session, "--json", db=url)
    assert result.returncode == 0, result.stdout + result.stderr
    return int(json.loads(result.stdout)["events"])


@pytest.mark.parametrize("agent", ["researcher", "auditor"])
def test_a_sub_agent_exported_alone_carries_its_task_and_imports_without_its_parents_board(delegating, tmp_path, request, agent):
    """The researcher claimed a task posted on its parent's board (and failed it: a reflection); the auditor's
    task was opened by the delegate item. Either sits on the parent's board, outside the child's tree, yet it
    is the child's record of what it was asked and how that ended: `export CHILD` carries it, `verify CHILD`
    checks it, and import takes it without the rest of the parent's board: there the child finds its task as at
    home (verify CHILD checks as many events), and exported again it still carries it."""
    from chronicle.runtime.task_board import board_task_ids, get_task, prior_reflections, task_row

    source, session = delegating
    row = next(r for r in json_lines(cli("tasks", session, "--json", db=source).stdout) if r["agent"] == agent and r["child_session_id"])
    child, task = row["child_session_id"], row["task_id"]
    bundle = export(source, child, tmp_path / "child.json")
    assert bundle["manifest"]["sessions"] == [child]
    store = ChronicleStore(source)
    held = [(e.originator_version, e.topic) for e in store.recorder.select_events(UUID(task))]
    store.close()
    assert [(e["version"], e["topic"]) for e in bundle["events"] if e["originator_id"] == task] == held and held
    assert verified_events(source, child) == len(bundle["events"]), "verify CHILD checks what export CHILD carries"

    target = other_store(source, tmp_path, request, "target")
    imported = cli("import", str(tmp_path / "child.json"), db=target)
    assert imported.returncode == 0, imported.stderr
    assert verified_events(target, child) == verified_events(source, child)
    assert cli("verify", db=target).returncode == 0
    there = ChronicleStore(target)
    assert task_row(get_task(there, UUID(task))) == {k: v for k, v in row.items() if k != "instance"}, "the task reads as at home"
    posted = [UUID(task)] if agent == "researcher" else []
    assert board_task_ids(there, UUID(session)) == posted, "the claimed task alone, on the board of a parent not here"
    assert json_lines(cli("tasks", child, "--json", db=target).stdout) == []
    again = export(target, child, tmp_path / "again.json")
    assert [e["state"] for e in again["events"]] == [e["state"] for e in bundle["events"]]
    offered = prior_reflections(there, "find the config file")
    assert bool(offered) is (agent == "researcher"), "a failed task's reflection is offered to later delegations there too"
    there.close()
    twice = cli("import", str(tmp_path / "child.json"), db=target)
    assert twice.returncode == 1 and "already holds" in twice.stderr


def test_a_sub_agent_imported_alone_first_merges_into_its_parents_tree_imported_after(delegating, tmp_path, request):
    """As a fork imported before its parent: the parent's bundle carries the children already here, byte for byte the
    same events (their sessions, turns and claimed tasks), so they are kept, the rest written, and every event, index
    entry and board entry is there once. A child that went on here since is refused, saying what to do."""
    source, session = delegating
    children = [r["child_session_id"] for r in json_lines(cli("tasks", session, "--json", db=source).stdout) if r["child_session_id"]]
    for child in children:
        export(source, child, tmp_path / f"{child}.json")
    parent = export(source, session, tmp_path / "parent.json")
    target = other_store(source, tmp_path, request, "target")
    for child in children:
        assert cli("import", str(tmp_path / f"{child}.json"), db=target).returncode == 0
    imported = cli("import", str(tmp_path / "parent.json"), "--json", db=target)
    assert imported.returncode == 0, imported.stderr
    row = json.loads(imported.stdout)
    held = sum(len(json.loads((tmp_path / f"{c}.json").read_text())["events"]) for c in children)
    assert (row["events"] + row["already_held"], row["already_held"]) == (len(parent["events"]), held)
    for args in (("tasks", session, "--json"), ("history", session, "--json"), *(("history", c, "--json") for c in children)):
        assert cli(*args, db=target).stdout == cli(*args, db=source).stdout, args
    assert sorted(s["session_id"] for s in json_lines(cli("sessions", "--all", "--json", db=target).stdout)) == sorted(
        [session, *children])
    tamper = Tamper(target)
    stored = [(oid, version) for oid, version, _topic, _state in (tamper.event(p) for p in tamper.positions())]
    assert len(stored) == len(set(stored))
    assert cli("verify", db=target).returncode == 0 and cli("doctor", db=target).returncode == 0
    again = cli("import", str(tmp_path / "parent.json"), db=target)
    assert again.returncode == 1 and f"already holds aggregate {session}" in again.stderr, again.stderr

    went_on = other_store(source, tmp_path, request, "went-on")
    assert cli("import", str(tmp_path / f"{children[0]}.json"), db=went_on).returncode == 0
    assert cli("archive", children[0], db=went_on).returncode == 0  # one event more here than in the parent's bundle
    refused = cli("import", str(tmp_path / "parent.json"), db=went_on)
    assert refused.returncode == 1, refused.stderr
    assert f"this store already holds session {children[0]} of the bundle's tree with other events than the bundle's" in refused.stderr
    assert "import this tree into a store that does not hold it" in refused.stderr and "nothing recorded" in refused.stderr


def test_a_sub_agents_bundle_whose_claimed_task_names_another_board_than_its_parents_is_refused(delegating, tmp_path, request):
    """The claimed task a sub-agent's bundle may bring is one on its own parent's board: moved to any other
    board (one of the target's own sessions), it is refused as any forged posted task is."""
    from uuid import uuid4

    source, session = delegating
    row = next(r for r in json_lines(cli("tasks", session, "--json", db=source).stdout) if r["agent"] == "researcher")
    data = export(source, row["child_session_id"], tmp_path / "child.json")
    assert any(e["topic"].endswith("DelegatedTask.Posted") for e in data["events"])
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(posted_elsewhere(source, data, uuid4())))
    target = other_store(source, tmp_path, request, "target")
    result = cli("import", str(path), db=target)
    assert result.returncode == 1 and "not in the bundle" in result.stderr and "nothing recorded" in result.stderr, result.stderr
    assert json_lines(cli("sessions", "--json", db=target).stdout) == []


def test_a_sub_agents_bundle_may_not_add_its_claimed_task_to_the_board_of_a_session_the_target_holds(delegating, tmp_path, request):
    """A sub-agent's claimed task is listed on its parent's board only where that parent is not: a session of the
    target's own under the parent's id (whoever made it) keeps its board as it is, and the import is refused."""
    from datetime import datetime, timezone

    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.session import Session
    from chronicle.runtime.task_board import board_task_ids

    source, session = delegating
    row = next(r for r in json_lines(cli("tasks", session, "--json", db=source).stdout) if r["agent"] == "researcher")
    export(source, row["child_session_id"], tmp_path / "child.json")
    target = other_store(source, tmp_path, request, "target")
    store = ChronicleStore(target)
    store.create_session(Session.start(UUID(session), AgentSpec(name="main"), datetime.now(timezone.utc)))
    result = cli("import", str(tmp_path / "child.json"), db=target)
    assert result.returncode == 1 and "which this store holds" in result.stderr and "nothing recorded" in result.stderr, result.stderr
    assert board_task_ids(store, UUID(session)) == [] and store.session_ids() == [UUID(session)]
    store.close()


@pytest.mark.parametrize("agent", ["researcher", "auditor"])
def test_log_of_a_sub_agent_shows_its_own_task_as_export_carries_it(delegating, agent):
    db_url, session = delegating
    row = next(r for r in json_lines(cli("tasks", session, "--json", db=db_url).stdout) if r["agent"] == agent and r["child_session_id"])
    entries = json_lines(cli("log", row["child_session_id"], "--json", db=db_url).stdout)
    assert [e["position"] for e in entries] == sorted(e["position"] for e in entries)
    tasks = [e for e in entries if e["aggregate"] == "task"]
    assert {e["aggregate_id"] for e in tasks} == {row["task_id"]} and tasks[-1]["status"] == row["status"]
