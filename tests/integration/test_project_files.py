"""AGENTS.md and TOOLS.md read when a session starts, recorded on its spec, and what the model is given at
every later request: the text as read then, secrets cut out before it was recorded (both backends)."""

from __future__ import annotations

from datetime import date

from chronicle.runtime.app.specs import new_spec
from tests.helpers import response, text
from tests.integration.loop_harness import Harness
from tests.store_dump import dump_store, holds

# Built from parts, so that no scanner of this repository's files trips over them.
GITHUB_TOKEN = "ghp_" + "Zr8Kq2Lm9Nx4Vb7Tc1Hd6Jf3Gs5Pw0Ya8Eu2"


def harness(db_url, workspace, tmp_path, answers) -> Harness:
    h = Harness(db_url, workspace, tmp_path, answers)
    h.spec = new_spec(workspace, provider=h.spec.provider, today=date(2026, 3, 4))
    return h


def test_the_files_as_read_at_creation_are_what_every_later_request_is_given(db_url, workspace, tmp_path):
    (workspace / "AGENTS.md").write_text("# Conventions\nIndent with tabs.\n", encoding="utf-8")
    (workspace / "TOOLS.md").write_text("bash has no network here.\n", encoding="utf-8")
    h = harness(db_url, workspace, tmp_path, [[response(text("one"))], [response(text("two"))]])
    assert h.run("first").status == "completed"
    (workspace / "AGENTS.md").write_text("# Conventions\nIndent with four spaces.\n", encoding="utf-8")
    (workspace / "TOOLS.md").unlink()
    assert h.run("second").status == "completed"

    first, second = (r.system for r in h.provider.requests if r.auxiliary is None)
    assert first == second, "the second turn was asked with another system prompt than the first"
    assert '<file name="AGENTS.md">\n# Conventions\nIndent with tabs.\n</file>' in first
    assert '<file name="TOOLS.md">\nbash has no network here.\n</file>' in first
    assert "four spaces" not in first
    recorded = h.store.session(h.session_id).spec
    assert [(f.name, f.text) for f in recorded.project_files] == [
        ("AGENTS.md", "# Conventions\nIndent with tabs."), ("TOOLS.md", "bash has no network here.")]
    # A new session reads the file as it is now.
    fresh = new_spec(workspace, provider=h.spec.provider)
    assert [(f.name, f.text) for f in fresh.project_files] == [("AGENTS.md", "# Conventions\nIndent with four spaces.")]


def test_a_secret_in_agents_md_is_cut_before_it_reaches_the_store_or_the_model(db_url, workspace, tmp_path):
    (workspace / "AGENTS.md").write_text(f"Deploy with the token {GITHUB_TOKEN} when asked.\n", encoding="utf-8")
    h = harness(db_url, workspace, tmp_path, [response(text("ok"))])
    assert h.run("deploy?").status == "completed"

    [agents_md] = h.store.session(h.session_id).spec.project_files
    assert agents_md.text == "Deploy with the token [REDACTED:github-token] when asked."
    assert agents_md.redacted == {"github-token": 1}
    assert "[REDACTED:github-token]" in h.provider.requests[0].system and GITHUB_TOKEN not in h.provider.requests[0].system
    dump = dump_store(db_url)
    assert holds(dump, "[REDACTED:github-token]"), "the dump does hold the events (the test could not fail otherwise)"
    assert not holds(dump, GITHUB_TOKEN), "the token in AGENTS.md reached the store"


def test_a_secret_in_memory_md_is_cut_before_it_is_recorded_too(db_url, workspace, tmp_path):
    (workspace / "MEMORY.md").write_text(f"The user's token is {GITHUB_TOKEN}.\n", encoding="utf-8")
    h = harness(db_url, workspace, tmp_path, [response(text("ok"))])
    assert h.run("hi").status == "completed"
    spec = h.store.session(h.session_id).spec
    assert (spec.memory, spec.memory_redacted) == ("The user's token is [REDACTED:github-token].", {"github-token": 1})
    assert not holds(dump_store(db_url), GITHUB_TOKEN), "the token in MEMORY.md reached the store"
