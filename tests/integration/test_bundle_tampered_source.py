"""A session whose stored rows were tampered with is not laundered through export and import.

An import gives every event new, valid links in the target's chain, so a bundle of an edited row used to come
out of the target verified. `export` now checks the session's chain as `verify SESSION` does and refuses a
broken one (CLI and library alike); `import` re-checks each event it can against the digest it had in the
source's chain, so a bundle that older code exported from a tampered store is refused too."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from uuid import UUID

import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.runtime.bundle import export_bundle
from chronicle.runtime.compression import SizedZlib
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper


@pytest.fixture
def recorded(db_url, workspace, tmp_path):  # type: ignore[no-untyped-def]
    """A session that read a file, and a signing key beside it."""
    script = write_script(tmp_path / "s.json", [
        response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
        response(text("It says hello world.")),
    ])
    run = cli("run", "what is in hello.txt?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    assert cli("keygen", str(tmp_path / "key.pem")).returncode == 0
    return db_url, str(json_lines(run.stdout)[0]["session_id"]), Tamper(db_url)


def edit_answer(tamper: Tamper) -> int:
    """The model's answer edited in place, as someone with SQL access would: decompressed, changed, compressed again."""
    plain = SizedZlib()
    position = next(p for p in tamper.positions() if b"It says hello world." in plain.decompress(tamper.event(p)[3]))
    state = plain.decompress(tamper.event(position)[3])
    tamper.set_state(position, plain.compress(state.replace(b"hello world", b"goodbye all")))
    return position


def test_export_refuses_a_session_with_an_edited_row_in_the_cli_and_the_library(recorded, tmp_path):
    db_url, session, tamper = recorded
    position = edit_answer(tamper)
    out = tmp_path / "t.json"
    result = cli("export", session, "--out", str(out), "--sign", str(tmp_path / "key.pem"), db=db_url)
    assert result.returncode == 1, result.stdout + result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: refused to export session {session}: "), line
    assert f"broken at position {position} (Turn " in line and ": edited: " in line and f"verify {session}" in line, line
    assert not out.exists()
    with Chronicle(db_url) as app, pytest.raises(ChronicleError) as raised:
        app.export(session)
    said = str(raised.value)  # the same line; its `chronicle verify` hint names the library's store with --db
    assert raised.value.code == 1 and said.split("`")[0] == line.removeprefix("error: ").split("`")[0], said
    assert f"verify {session}` shows it" in said


def test_export_refuses_a_session_whose_last_event_was_deleted(recorded, tmp_path):
    """No hole in any aggregate's versions, so every reader loads the session; the chain still names the cut."""
    db_url, session, tamper = recorded
    last = max(p for p in tamper.positions() if tamper.event(p)[0] == UUID(session))
    tamper.delete(last)
    assert cli("history", session, db=db_url).returncode == 0
    result = cli("export", session, "--out", str(tmp_path / "t.json"), db=db_url)
    assert result.returncode == 1 and f"broken at position {last} " in result.stderr and ": missing: " in result.stderr, result.stderr


def test_an_untouched_session_still_exports_signed(recorded, tmp_path):
    db_url, session, _tamper = recorded
    result = cli("export", session, "--out", str(tmp_path / "t.json"), "--sign", str(tmp_path / "key.pem"), db=db_url)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "t.json").read_text())["signature"]


def _old_export(db_url: str, session: str, key: Path) -> dict:  # type: ignore[type-arg]
    """A bundle as export wrote it before it checked the chain: the bundle writer alone, which checks nothing."""
    with closing(ChronicleStore(db_url)) as store:
        return export_bundle(store, UUID(session), key.read_bytes())


def test_import_refuses_a_bundle_older_code_exported_from_an_edited_store(recorded, tmp_path):
    db_url, session, tamper = recorded
    position = edit_answer(tamper)
    bundle = _old_export(db_url, session, tmp_path / "key.pem")
    positions = [e["position"] for e in bundle["events"]]
    assert position in positions and position - 1 in positions  # its link's predecessor travels with it: re-checkable
    old = tmp_path / "old.json"
    old.write_text(json.dumps(bundle))
    target = f"sqlite:///{tmp_path / 'target.db'}"
    ChronicleStore(target).close()
    result = cli("import", str(old), "--key", str(tmp_path / "key.pem.pub"), db=target)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"(position {position}, Turn ModelResponded" in result.stderr and "source store's chain" in result.stderr, result.stderr
    assert "nothing recorded" in result.stderr and Tamper(target).positions() == []


def test_a_bundle_older_code_exported_from_an_untouched_store_still_imports(recorded, tmp_path):
    db_url, session, _tamper = recorded
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_old_export(db_url, session, tmp_path / "key.pem")))
    target = f"sqlite:///{tmp_path / 'target.db'}"
    result = cli("import", str(old), "--key", str(tmp_path / "key.pem.pub"), db=target)
    assert result.returncode == 0, result.stderr
    assert cli("verify", session, db=target).returncode == 0


def test_a_bundle_edited_after_the_export_is_refused_without_blaming_the_source(recorded, tmp_path):
    """An event of a bundle changed after the export, its bundle digests redone (the source digest left as exported): the
    refusal says what is known, that the event does not match the source digest the bundle records for it and that the
    bundle or the source changed, not that the source store was edited (it was not: it still verifies)."""
    import base64

    from chronicle.runtime.bundle import _digest
    from chronicle.runtime.chain import GENESIS
    from chronicle.runtime.chain_reader import RawEvent

    db_url, session, _tamper = recorded
    out = tmp_path / "b.json"
    assert cli("export", session, "--out", str(out), db=db_url).returncode == 0
    data = json.loads(out.read_text())
    plain = SizedZlib()
    edited = next(e for e in data["events"] if b"It says hello world." in plain.decompress(base64.b64decode(e["state"])))
    state = plain.decompress(base64.b64decode(edited["state"]))
    edited["state"] = base64.b64encode(plain.compress(state.replace(b"hello world", b"goodbye all"))).decode()
    prev = GENESIS
    for i, entry in enumerate(data["events"], start=1):
        prev = _digest(prev, i, RawEvent(entry["position"], UUID(entry["originator_id"]), entry["version"], entry["topic"],
                                         base64.b64decode(entry["state"])))
        entry["digest"] = prev.hex()
    data["manifest"]["head"] = prev.hex()
    out.write_text(json.dumps(data))
    result = cli("import", str(out), db=f"sqlite:///{tmp_path / 'target.db'}")
    line = result.stderr.strip()
    assert result.returncode == 1 and len(line.splitlines()) == 1, result.stdout + result.stderr
    assert f"(position {edited['position']}, Turn ModelResponded" in line and "nothing recorded" in line, line
    assert "does not match the digest the bundle records for it from the source store's chain" in line, line
    assert "in the bundle after the export or in the source store before it" in line and "edited there" not in line, line
    assert cli("verify", db=db_url).returncode == 0  # the source was not edited
