"""export → import moves a session tree between stores intact; a tampered or wrongly signed bundle is refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper


@pytest.fixture
def exported(db_url, workspace, tmp_path):  # type: ignore[no-untyped-def]
    script = write_script(tmp_path / "s.json", [
        response(text("Reading <b>it</b>."), tool_use("tu_1", "read_file", path="hello.txt")),
        response(text("It says hello & <script>alert(1)</script>.")),
    ])
    run = cli("run", "what is in hello.txt?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    session = json_lines(run.stdout)[0]["session_id"]
    assert cli("keygen", str(tmp_path / "key.pem")).returncode == 0
    bundle = tmp_path / "bundle.json"
    result = cli("export", session, "--out", str(bundle), "--sign", str(tmp_path / "key.pem"), db=db_url)
    assert result.returncode == 0, result.stderr
    return db_url, session, bundle


def fresh(tmp_path: Path, name: str = "target.db") -> str:
    return f"sqlite:///{tmp_path / name}"


def test_an_imported_session_reads_the_same_in_history_replay_audit_and_cost(exported, tmp_path, workspace):
    source, session, bundle = exported
    target = fresh(tmp_path)
    result = cli("import", str(bundle), "--key", str(tmp_path / "key.pem.pub"), "--json", db=target)
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    manifest = json.loads(bundle.read_text())["manifest"]
    assert imported["session_id"] == session and imported["events"] == manifest["counts"]["events"] > 0
    for args in (("history", session, "--json"), ("history", session, "--at", "1", "--json"), ("cost", session, "--json")):
        assert cli(*args, db=target).stdout == cli(*args, db=source).stdout, args
    audit = [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli("audit", "--json", db=target).stdout)]
    assert audit == [{k: v for k, v in e.items() if k != "position"} for e in json_lines(cli("audit", "--json", db=source).stdout)]
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
    _source, _session, bundle = exported
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
    source, session, bundle = exported
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
    source, session, _bundle = exported
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
    assert cli("export", session, "-o", str(bundle), db=sqlite_url).returncode == 0  # -o: --out's short form
    assert json.loads(bundle.read_text())["manifest"]["counts"]["sessions"] == 2
    target = fresh(tmp_path)
    assert cli("import", str(bundle), db=target).returncode == 0
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
    assert base64.b64decode(load_data(ChronicleStore(target), sha)) == png
