"""CHRONICLE_CIPHER_KEY: event payloads are ciphertext at rest, and a wrong or missing key is one clear error."""

from __future__ import annotations

import base64
import os

from tests.helpers import cli, json_lines, response, text, write_script
from tests.tamper import Tamper

MARKER = "PLAINTEXT-MARKER-7f3a"


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_payloads_are_encrypted_and_only_the_right_key_opens_the_store(db_url, workspace, tmp_path):
    secret = {"CHRONICLE_CIPHER_KEY": key()}
    script = write_script(tmp_path / "s.json", [response(text(f"echo {MARKER}"))])
    run = cli("run", f"say {MARKER}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url, env=secret)
    assert run.returncode == 0, run.stderr
    session = json_lines(run.stdout)[0]["session_id"]
    tamper = Tamper(db_url)
    states = [tamper.event(p)[3] for p in tamper.positions()]
    assert states and not any(MARKER.encode() in s for s in states)
    history = json_lines(cli("history", session, "--json", db=db_url, env=secret).stdout)
    assert MARKER in history[0]["content"][0]["text"]
    assert cli("verify", db=db_url, env=secret).returncode == 0

    # `sessions` with the key builds the read models (plaintext, in the same database); without
    # it, `sessions` must still refuse rather than answer from them (runtime/app/session_listing.py)
    assert cli("sessions", db=db_url, env=secret).returncode == 0
    without = cli("sessions", "--json", db=db_url)
    assert without.returncode == 2 and "is encrypted" in without.stderr and not without.stdout, without.stderr

    for env, words in (({"CHRONICLE_CIPHER_KEY": key()}, "is not the key it was written with"),
                       ({}, "is encrypted: set CHRONICLE_CIPHER_KEY"),
                       ({"CHRONICLE_CIPHER_KEY": "not-a-key"}, "16, 24 or 32 random bytes")):
        refused = cli("history", session, db=db_url, env=env)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


def test_a_store_written_without_a_key_refuses_one(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("plain"))])
    assert cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url).returncode == 0
    refused = cli("sessions", db=sqlite_url, env={"CHRONICLE_CIPHER_KEY": key()})
    assert refused.returncode == 2 and "written without encryption" in refused.stderr


def test_an_encrypted_session_travels_with_its_tree_key_and_only_to_a_store_with_the_same_master_key(sqlite_url, workspace, tmp_path):
    secret = {"CHRONICLE_CIPHER_KEY": key()}
    script = write_script(tmp_path / "s.json", [response(text(f"echo {MARKER}"))])
    run = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url, env=secret)
    session = json_lines(run.stdout)[0]["session_id"]
    bundle = tmp_path / "s.json.bundle"
    assert cli("export", session, "--out", str(bundle), db=sqlite_url, env=secret).returncode == 0

    other = f"sqlite:///{tmp_path / 'other.db'}"
    elsewhere = {"CHRONICLE_CIPHER_KEY": key()}
    assert cli("run", "seed", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=other, env=elsewhere).returncode == 0
    refused = cli("import", str(bundle), db=other, env=elsewhere)
    assert refused.returncode == 1 and "another key" in refused.stderr, refused.stderr

    same = f"sqlite:///{tmp_path / 'same.db'}"
    assert cli("run", "seed", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=same, env=secret).returncode == 0
    imported = cli("import", str(bundle), db=same, env=secret)
    assert imported.returncode == 0, imported.stderr
    assert MARKER in cli("history", session, db=same, env=secret).stdout
    assert cli("verify", db=same, env=secret).returncode == 0
