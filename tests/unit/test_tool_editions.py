"""Chronicle's own tools are offered to a session in the edition it recorded (runtime/tools/editions.py), so an
upgrade that changes a built-in tool's schema neither changes what an older session is asked with nor makes its
replay diverge."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.agents.registry import child_spec
from chronicle.runtime.agents.tools import ORCHESTRATION_TOOLS
from chronicle.runtime.skills import LoadSkill
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import BUILTIN_TOOLS
from chronicle.runtime.tools.editions import EDITIONS, TOOL_EDITION
from chronicle.runtime.toolsets import agent_toolbox
from tests.helpers import cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: Every edition's schemas, hashed. Edition 1 is what every session recorded before editions was offered (the
#: same digest as the code of commit cc3fc6f). A change to a built-in tool's description or input schema
#: changes the newest digest: keep the old schema for the sessions that have it (`schema_for`), add an
#: edition to runtime/tools/editions.py, and pin its digest here.
PINNED = {1: "84c8c8e1d2dafa56", 2: "2b2b8f5a2e5e4d70"}


def digest(edition: int) -> str:
    schemas = sorted((c.schema_for(edition) for c in [*BUILTIN_TOOLS.values(), *ORCHESTRATION_TOOLS.values(), LoadSkill]),
                     key=lambda s: s["name"])
    return hashlib.sha256(json.dumps(schemas, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def test_every_edition_still_offers_the_schemas_it_was_pinned_with():
    assert sorted(EDITIONS) == list(range(1, TOOL_EDITION + 1)) == sorted(PINNED)
    changed = {e: digest(e) for e in PINNED if digest(e) != PINNED[e]}
    assert changed == {}, ("a built-in tool's schema changed: sessions of these editions would be asked differently and "
                           "replay as diverged; keep their schema in schema_for and add an edition (runtime/tools/editions.py)")


def test_delegate_offers_task_id_from_edition_2_only():
    old, new = (agent_toolbox(AgentSpec(tools=("delegate",), tool_edition=e)).schemas()[0] for e in (1, 2))
    assert "task_id" not in old["input_schema"]["$defs"]["DelegatedTask"]["properties"] and "task_id" not in old["description"]
    assert "task_id" in new["input_schema"]["$defs"]["DelegatedTask"]["properties"] and "task_id" in new["description"]


def test_a_spec_recorded_before_editions_reads_as_edition_1_and_dumps_as_it_was_recorded():
    recorded = AgentSpec(name="main", tools=("read_file",)).model_dump()
    assert "tool_edition" not in recorded
    assert AgentSpec.model_validate(recorded).tool_edition == 1
    assert AgentSpec(tool_edition=TOOL_EDITION).model_dump()["tool_edition"] == TOOL_EDITION


def test_a_sub_agent_is_offered_its_parents_edition():
    parent = AgentSpec(name="main", tools=("delegate",), max_depth=2, tool_edition=1)
    assert child_spec(parent, AgentSpec(name="counter", tools=("read_file",))).tool_edition == 1


def test_a_new_session_records_the_current_edition(tmp_path):
    db = f"sqlite:///{tmp_path / 'c.db'}"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [{"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}]}}))
    (tmp_path / "ws").mkdir()
    ran = cli("run", "hello", "--workspace", str(tmp_path / "ws"), "--provider", f"scripted:{script}", db=db)
    assert ran.returncode == 0, ran.stderr
    store = ChronicleStore(db)
    try:
        [session] = list(store.sessions())
        assert session.spec.tool_edition == TOOL_EDITION
    finally:
        store.close()


def test_a_delegating_session_recorded_before_task_id_still_replays_as_identical(tmp_path):
    """tests/fixtures/delegating_edition1.db: written by commit cc3fc6f (before delegate took task_id) with
    delegating_edition1.script.json; a main agent delegates to a counter that reports with task_complete."""
    shutil.copy(FIXTURES / "delegating_edition1.db", tmp_path / "old.db")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "CHANGES.md").write_text("three widgets: a, b, c\n")
    result = cli("replay", "f002554b", "--workspace", str(tmp_path / "ws"), db=f"sqlite:///{tmp_path / 'old.db'}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical: 1 turn(s), 2 model call(s) with matching request fingerprints")
