"""The trust commands from Python: `Chronicle.verify`, `export`, `import_bundle` and `forget` give what `verify --json`,
`export`, `import --json` and `forget --json` give, on both backends; a refusal is a ChronicleError that records nothing."""

from __future__ import annotations

import base64
import json
import os

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from chronicle.runtime.bundle import keygen
from tests.helpers import cli, response, text, tool_use
from tests.tamper import Tamper


def scripted(tmp_path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [response(tool_use("t1", "read_file", path="hello.txt")),
                                                    response(text("it says hello world"))]}}), encoding="utf-8")
    return f"scripted:{path}"


def other_url(db_url: str, tmp_path, pg_database=None) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'target.db'}"
    return db_url.split("?")[0] + "?schema=target_store"


def test_an_exported_tree_imports_into_another_store_signed_and_reads_the_same(db_url, workspace, tmp_path):
    keys = keygen(tmp_path / "signer.pem")
    with Chronicle(db_url) as source:
        sid = source.run_sync(Agent(tools=["read_file"], provider=scripted(tmp_path)), "read it", workspace=workspace).session_id
        assert source.verify()["ok"] is True and source.verify(sid)["ok"] is True
        bundle = source.export(sid, sign_with=(tmp_path / "signer.pem").read_bytes())
        history = source.history(sid)
    assert bundle["signature"] and bundle["manifest"]["session_id"] == sid
    with Chronicle(other_url(db_url, tmp_path)) as target:
        with pytest.raises(ChronicleError) as wrong:  # signed by another key than the one trusted
            target.import_bundle(bundle, key=keygen(tmp_path / "other.pem").read_bytes())
        assert wrong.value.code == 1 and "nothing recorded" in str(wrong.value)
        assert target.sessions() == []
        done = target.import_bundle(json.dumps(bundle), key=keys.read_text())  # a PEM as text or bytes
        assert (done["session_id"], done["sessions"], done["signed_by"]) == (sid, 1, bundle["signature"]["public_key"])
        assert target.history(sid) == history and target.verify()["ok"] is True
        with pytest.raises(ChronicleError) as again:
            target.import_bundle(bundle)
        assert again.value.code == 1
        with pytest.raises(ChronicleError) as not_a_key:
            target.import_bundle(bundle, key=b"not a key")
        assert not_a_key.value.code == 2


def test_a_tampered_bundle_and_a_tampered_log_are_found(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=["read_file"], provider=scripted(tmp_path)), "read it", workspace=workspace).session_id
        bundle = app.export(sid)
        bundle["events"][2]["state"] = bundle["events"][1]["state"]
        with pytest.raises(ChronicleError) as refused:
            app.import_bundle(bundle)
        assert refused.value.code == 1 and "refused the bundle" in str(refused.value)
        tamper = Tamper(db_url)
        position = tamper.positions()[3]
        tamper.set_state(position, tamper.event(tamper.positions()[2])[3])
        verdict = app.verify()
        assert verdict["ok"] is False and verdict["broken"]["position"] == position
        said = json.loads(cli("verify", "--json", db=db_url).stdout)
        assert said == verdict


def test_forget_erases_a_tree_and_the_chain_still_verifies(db_url, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=["read_file"], provider=scripted(tmp_path)), "read it", workspace=workspace).session_id
        done = app.forget(sid, actor="dpo@example")
        assert done["session_ids"] == [sid] and done["actor"] == "dpo@example"
        with pytest.raises(ChronicleError) as gone:
            app.history(sid)
        assert gone.value.code == 1 and "forgotten" in str(gone.value)
        assert app.verify()["ok"] is True
        assert [r for r in app.audit() if r["kind"] == "forget"][0]["detail"]["actor"] == "dpo@example"


def test_forget_without_encryption_is_refused_and_erases_nothing(sqlite_url, workspace, tmp_path, monkeypatch):
    monkeypatch.delenv("CHRONICLE_CIPHER_KEY", raising=False)
    with Chronicle(sqlite_url) as app:
        sid = app.run_sync(Agent(tools=["read_file"], provider=scripted(tmp_path)), "read it", workspace=workspace).session_id
        with pytest.raises(ChronicleError) as refused:
            app.forget(sid)
        assert refused.value.code == 2 and "CHRONICLE_CIPHER_KEY" in str(refused.value)
        assert app.history(sid)


def test_the_server_verifies_and_exports_as_the_library_does(db_url, workspace, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=["read_file"], provider=scripted(tmp_path)), "read it", workspace=workspace).session_id
        with TestClient(app.http_app(run_worker=False)) as client:
            assert client.get("/verify").json() == app.verify()
            assert client.get(f"/sessions/{sid}/verify").json() == app.verify(sid)
            exported = client.get(f"/sessions/{sid}/export").json()
            assert client.get("/sessions/nope/export").status_code == 404
    assert exported["manifest"]["session_id"] == sid and exported["signature"] is None
    with Chronicle(other_url(db_url, tmp_path)) as target:
        assert target.import_bundle(exported)["events"] == exported["manifest"]["counts"]["events"]
