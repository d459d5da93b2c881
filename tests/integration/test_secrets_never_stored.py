"""Secrets in a prompt, the model's text, a tool's input or its output never reach the store (issue 13).

Each well-known format goes in through another door; afterwards neither the SQLite file's bytes nor
`pg_dump` holds any of them, the events hold `[REDACTED:kind]` and the counts, and the model's next
request carried the redacted text only."""

from __future__ import annotations

from chronicle.runtime.secret_scan import scanner_for
from tests.helpers import response, text, tool_use
from tests.integration.loop_harness import Harness
from tests.store_dump import dump_store, holds

# Built from parts, so that no scanner of this repository's files trips over them.
AWS_KEY = "AKIA" + "QX7RZ2MPL4KD9WNT"
GITHUB_TOKEN = "ghp_" + "Zr8Kq2Lm9Nx4Vb7Tc1Hd6Jf3Gs5Pw0Ya8Eu2"
ANTHROPIC_KEY = "sk-ant-" + "api03-Xw9Lq2Zr8Km4Nv7Tb1Hc6Jd3Gf5Ps0Ya"
PRIVATE_KEY = "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH " + "PRIVATE KEY-----"
ENTROPY_TOKEN = "Qm7Zx2Rt9Lp4Vw8Ks1Nd6Hf3Jb5Gc0Ty"
PRIVATE_KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"


def test_known_secret_formats_never_reach_the_database_and_the_model_sees_them_redacted(db_url, workspace, tmp_path):
    (workspace / "creds.txt").write_text(f"deploy key:\n{PRIVATE_KEY}\nsession {ENTROPY_TOKEN}\n", encoding="utf-8")
    h = Harness(db_url, workspace, tmp_path, [
        response(text(f"I will note the token {GITHUB_TOKEN} first."),
                 tool_use("a", "write_file", path="note.txt", content=f"anthropic {ANTHROPIC_KEY}"),
                 tool_use("b", "read_file", path="creds.txt")),
        response(text("done")),
    ], auto_approve=True)
    outcome = h.run(f"my AWS key is {AWS_KEY}; keep it safe")
    assert outcome.status == "completed", outcome.reason

    dump = dump_store(db_url)
    assert holds(dump, "[REDACTED:"), "the dump does hold the events (encrypted or not, the test could not fail)"
    for secret in (AWS_KEY, GITHUB_TOKEN, ANTHROPIC_KEY, PRIVATE_KEY_BODY, ENTROPY_TOKEN):
        assert not holds(dump, secret), f"{secret[:12]}… reached the store"

    # What the model was sent next: the recorded, redacted text.
    second = repr(h.provider.requests[1].messages)
    for secret in (AWS_KEY, GITHUB_TOKEN, ANTHROPIC_KEY, PRIVATE_KEY_BODY, ENTROPY_TOKEN):
        assert secret not in second
    for kind in ("aws-access-key", "github-token", "anthropic-key", "private-key", "high-entropy"):
        assert f"[REDACTED:{kind}]" in second, kind
    # The tool ran on the recorded input: the file holds the marker, not the key.
    assert (workspace / "note.txt").read_text(encoding="utf-8") == "anthropic [REDACTED:anthropic-key]"

    counts: dict[str, int] = {}
    store = h.store
    session = store.session(h.session_id)
    for _, event in store.events_with_positions(store.aggregate_ids_of(session)):
        if type(event).__name__ == "SecretsRedacted":
            for kind, n in event.counts.items():
                counts[kind] = counts.get(kind, 0) + n
    assert counts == {"aws-access-key": 1, "github-token": 1, "anthropic-key": 1, "private-key": 1, "high-entropy": 1}


def test_privacy_redact_false_keeps_formats_but_never_the_process_secrets(db_url, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "svc-" + "Tq4Wm8Rz2Xk6")
    (workspace / "chronicle.toml").write_text("[privacy]\nredact = false\n", encoding="utf-8")
    assert scanner_for(workspace).enabled is False
    h = Harness(db_url, workspace, tmp_path, [response(text("ok"))])
    assert h.run(f"token {GITHUB_TOKEN} and svc-Tq4Wm8Rz2Xk6").status == "completed"
    dump = dump_store(db_url)
    assert holds(dump, GITHUB_TOKEN)  # the workspace asked for it
    assert not holds(dump, "svc-Tq4Wm8Rz2Xk6") and holds(dump, "[REDACTED:environment]")


def test_configured_patterns_are_redacted_under_their_own_name(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[privacy]\npatterns = { employee-id = "EMP-[0-9]{6}" }\n', encoding="utf-8")
    h = Harness(sqlite_url, workspace, tmp_path, [response(text("ok"))])
    assert h.run("look up EMP-123456 please").status == "completed"
    dump = dump_store(sqlite_url)
    assert not holds(dump, "EMP-123456") and holds(dump, "[REDACTED:employee-id]")


def test_a_failed_turns_reason_is_scanned_before_it_is_recorded(db_url, workspace, tmp_path):
    """A provider's (or a tool server's, or a hook's) error can repeat a key it was given: the reason is shown by
    `log`, `why` and `audit` and exported, so it is scanned like everything else the turn records."""
    h = Harness(db_url, workspace, tmp_path, [
        {"error": {"kind": "invalid_request", "message": f"bad key {ANTHROPIC_KEY} for org", "retryable": False}},
    ])
    outcome = h.run("go")
    assert outcome.status == "failed"
    assert ANTHROPIC_KEY not in (outcome.reason or "") and "[REDACTED:anthropic-key]" in (outcome.reason or "")
    assert not holds(dump_store(db_url), ANTHROPIC_KEY), "the failed turn's reason reached the store"
    turn = h.store.turn(h.store.session(h.session_id).turns[-1])
    assert "[REDACTED:anthropic-key]" in (turn.reason or "")
