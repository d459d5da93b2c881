"""Chronicle's own tools are offered to a session in the edition it recorded (runtime/tools/editions.py), so an
upgrade that changes a built-in tool's schema neither changes what an older session is asked with nor makes its
replay diverge."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.agents.registry import AgentRegistry, agents_directory, child_spec, with_orchestration_tools
from chronicle.runtime.agents.tools import ORCHESTRATION_TOOLS
from chronicle.runtime.skills import LoadSkill
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import BUILTIN_TOOLS, DEFAULT_TOOLS
from chronicle.runtime.tools.editions import BEFORE_EDITIONS, EDITIONS, TOOL_EDITION, EarlierSchemas
from chronicle.runtime.toolsets import agent_toolbox
from tests.helpers import cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: Every edition's schemas, hashed. Edition 1 is what every session recorded before editions was offered (the
#: same digest as the code of commit cc3fc6f). A change to a built-in tool's description or input schema
#: changes the newest digest: keep the old schema for the sessions that have it (`schema_for`), add an
#: edition to runtime/tools/editions.py, and pin its digest here.
PINNED = {1: "84c8c8e1d2dafa56", 2: "2b2b8f5a2e5e4d70", 3: "731d577563a4fa98", 4: "731d577563a4fa98", 5: "731d577563a4fa98"}


def digest(edition: int) -> str:
    """The schemas of the tools the edition has (a tool added later is no part of an older edition)."""
    tools = [c for c in [*BUILTIN_TOOLS.values(), *ORCHESTRATION_TOOLS.values(), LoadSkill] if c.since_edition <= edition]
    schemas = sorted((c.schema_for(edition) for c in tools), key=lambda s: s["name"])
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


def test_list_tasks_is_given_with_delegate_from_edition_3_only_and_an_older_sessions_sub_agents_get_none():
    researcher, planner = AgentSpec(name="researcher", tools=("read_file",)), AgentSpec(name="planner", max_depth=2)
    for edition, has in ((1, False), (2, False), (3, True)):
        parent = with_orchestration_tools(AgentSpec(name="main", tools=("read_file",), max_depth=2, tool_edition=edition,
                                                    registry=(researcher, planner)))
        assert ("list_tasks" in parent.tools) is has and "delegate" in parent.tools
        assert ("list_tasks" in child_spec(parent, planner).tools) is has, "a sub-agent is given tools by its parent's edition"
        assert ("list_tasks" in agents_directory(parent)) is has, "the recorded directory points to list_tasks when it is there"
    assert "list_tasks" not in with_orchestration_tools(AgentSpec(name="main", tool_edition=3)).tools, "no one to delegate to"
    assert AgentRegistry(agents=(researcher,)).main_spec("p", "m", "/w").tools[-1] == "list_tasks"


def test_a_sub_agent_that_may_delegate_is_told_whom_from_edition_5_only():
    leaf = AgentSpec(name="leaf", tools=("read_file",), description="reads")
    lead = AgentSpec(name="lead", tools=("read_file",), max_depth=3)
    for edition, told in ((4, False), (5, True)):
        parent = with_orchestration_tools(AgentSpec(name="main", max_depth=3, tool_edition=edition, registry=(lead, leaf)))
        child = child_spec(parent, lead, "lead-1")
        assert "delegate" in child.tools
        assert ("<available_agents>" in child.preamble) is told and child.preamble.startswith("<identity>")
        if told:
            assert child.preamble.endswith("</available_agents>") and "- leaf: reads" in child.preamble
    last = child_spec(with_orchestration_tools(AgentSpec(name="main", max_depth=1, tool_edition=5, registry=(lead, leaf))), lead)
    assert "delegate" not in last.tools and "<available_agents>" not in last.preamble, "at its depth limit: no one to name"


def test_delegate_points_to_list_tasks_from_edition_3_only():
    schemas = {e: agent_toolbox(AgentSpec(tools=("delegate",), tool_edition=e)).schemas()[0] for e in (2, 3)}
    described = {e: (s["description"], s["input_schema"]["$defs"]["DelegatedTask"]["properties"]["task_id"]["description"])
                 for e, s in schemas.items()}
    assert all("list_tasks" not in d for d in described[2]) and all("list_tasks" in d for d in described[3])


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


#: Each set of BEFORE_EDITIONS applied to edition 1's tools, hashed as `digest` hashes an edition. Both equal the
#: code of their releases: the first-parent commit before d311398 (tests_run) gives 1e2b088c904449ba, and the one
#: before c75033f (the tool sandbox), which had no load_skill yet, gives the second set's digest without it.
PINNED_EARLIER = {"before tests_run": "1e2b088c904449ba", "before the tool sandbox": "f52088140af1ba0d"}


def earlier_digest(earlier: EarlierSchemas) -> str:
    tools = [c for c in [*BUILTIN_TOOLS.values(), *ORCHESTRATION_TOOLS.values(), LoadSkill] if c.since_edition <= 1]
    schemas = sorted((earlier.apply(c.schema_for(1)) for c in tools), key=lambda s: s["name"])
    return hashlib.sha256(json.dumps(schemas, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def test_the_schemas_releases_before_editions_offered_are_pinned():
    assert {e.name: earlier_digest(e) for e in BEFORE_EDITIONS} == PINNED_EARLIER


def test_the_schemas_before_the_tool_sandbox_are_those_the_v1_fixture_was_asked_with():
    """tools_sha256 as every Turn.ModelResponded of tests/fixtures/v1_store.db (commit 338380d) stored it."""
    [before_sandbox] = [e for e in BEFORE_EDITIONS if e.name == "before the tool sandbox"]
    schemas = agent_toolbox(AgentSpec(tools=DEFAULT_TOOLS)).schemas_as(before_sandbox)
    recorded = hashlib.sha256(json.dumps(schemas, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    assert recorded == "cd96e35d954e1f3c3caed53d8595a2a752a744d5cc167831d1fb7e4f7d6b7656"


def test_earlier_schemas_change_chronicles_own_tools_only(tmp_path):
    """A user's tool that shares a built-in's name is the user's: no release of Chronicle described it."""
    (tmp_path / "mine.py").write_text(
        "from chronicle import tool\n\n@tool(read_only=True)\ndef glob(pattern: str) -> str:\n    '''My own glob.'''\n    return pattern\n"
    )
    [before_sandbox] = [e for e in BEFORE_EDITIONS if e.name == "before the tool sandbox"]
    box = agent_toolbox(AgentSpec(tools=("mine:glob", "list_dir")), tmp_path)
    mine, list_dir = box.schemas_as(before_sandbox)
    assert mine == box.schemas()[0] and mine["description"].startswith("My own glob")
    assert list_dir["description"] == "List a directory in the workspace; directories end with '/'."


def test_a_sub_agent_is_told_to_end_with_task_complete_from_edition_4_only():
    """Seed 004's <completion_protocol> is recorded in a new sub-agent's prompt; an older session's new sub-agents
    are prompted as its release prompted them."""
    child = AgentSpec(name="counter", tools=("read_file",), instructions="Count the lines.")
    prompts = {e: child_spec(AgentSpec(name="main", tools=("delegate",), max_depth=2, tool_edition=e), child).system_prompt
               for e in (3, 4)}
    assert "<completion_protocol>" not in prompts[3] and prompts[3].startswith("Count the lines.")
    assert prompts[4].startswith("<completion_protocol>") and "task_complete" in prompts[4] and prompts[4].endswith("Count the lines.")
    assert "<completion_protocol>" not in AgentRegistry(agents=(child,)).main_spec("p", "m", "/w").system_prompt
    # and its <identity> first, once delegate has named it (seed 004's instance name)
    named = {e: child_spec(AgentSpec(name="main", tools=("delegate",), max_depth=2, tool_edition=e),
                           child.model_copy(update={"description": "Counts lines"}), "counter-count-lines-1")
             for e in (3, 4)}
    assert named[4].system_prompt.startswith("<identity>\nYou are counter-count-lines-1, a counter sub-agent: Counts lines\n"
                                             "</identity>\n\n<completion_protocol>")
    assert "<identity>" not in named[3].system_prompt and named[3].instance == named[4].instance == "counter-count-lines-1"
