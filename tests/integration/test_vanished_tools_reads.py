"""What the check for a continued session's vanished tools reads (runtime/app/vanished_tools.py): no turn at all
while its import paths hold every tool they held when it started, and otherwise its turns in one batch, not one
read per turn. Both backends; the store is the real one, counting what the check asks of it."""

from __future__ import annotations

import json
import sys
from uuid import UUID, uuid4

from chronicle import Agent, Chronicle
from chronicle.runtime.app.vanished_tools import checked_tools
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import agent_toolbox
from tests.helpers import response, text, tool_use


class CountingStore(ChronicleStore):
    """The real store, counting the turn reads made through it."""

    name = ChronicleStore.name  # the application's name makes its table names

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.single, self.batches = 0, 0

    def turn(self, turn_id, version=None):  # type: ignore[no-untyped-def]
        self.single += 1
        return super().turn(turn_id, version)

    def turns(self, turn_ids):  # type: ignore[no-untyped-def]
        self.batches += 1
        return super().turns(turn_ids)


TOOLS = ("from chronicle import tool\n\n\n@tool(read_only=True)\ndef lookup(key: str) -> str:\n    \"\"\"Look up.\"\"\"\n"
         "    return key\n\n\n@tool(read_only=True)\ndef refund(key: str) -> str:\n    \"\"\"Refund.\"\"\"\n    return key\n\n\n"
         "TOOLS = [lookup, refund]\n")


def session_of_five_turns(db_url: str, workspace, tmp_path) -> tuple[str, str]:
    module = f"shop_{uuid4().hex[:8]}"
    (workspace / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    turns = [[response(tool_use(f"t{i}", "lookup", key="k")), response(text(f"answer {i}"))] for i in range(5)]
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    agent = Agent(tools=[f"{module}:TOOLS"], provider=f"scripted:{path}")
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "turn 0", workspace=workspace).session_id
        for i in range(1, 5):
            assert app.run_sync(agent, f"turn {i}", session=sid).status == "completed"
    return module, sid


def check(db_url: str, sid: str, workspace, recorded_names: bool = True) -> tuple[list[str], int, int]:
    """`recorded_names=False`: the session as one recorded before specs named their tools (an in-memory copy)."""
    store = CountingStore(db_url)
    try:
        session = store.session(UUID(sid))
        if not recorded_names:
            session.spec_data = {k: v for k, v in session.spec_data.items() if k != "import_tools"}
        notes = checked_tools(store, session, agent_toolbox(session.spec, workspace), workspace)
        return notes, store.single, store.batches
    finally:
        store.close()


def test_nothing_gone_reads_no_turn_and_a_tool_gone_reads_the_turns_together(db_url, workspace, tmp_path):
    module, sid = session_of_five_turns(db_url, workspace, tmp_path)
    assert check(db_url, sid, workspace) == ([], 0, 0)
    tools = sys.modules[module].TOOLS
    tools.remove(sys.modules[module].refund)  # never called: a note, after one batch of the five turns
    notes, single, batches = check(db_url, sid, workspace)
    assert len(notes) == 1 and "no longer holds 'refund'" in notes[0]
    assert (single, batches) == (0, 1)


def test_a_spec_recorded_without_tool_names_reads_its_turns_in_one_batch(db_url, workspace, tmp_path):
    """A session recorded before specs named their tools has nothing to compare: its history is read whenever it has
    import paths, but together rather than a query (or two) per turn; a tool gone that it never called cannot be told."""
    module, sid = session_of_five_turns(db_url, workspace, tmp_path)
    assert check(db_url, sid, workspace, recorded_names=False) == ([], 0, 1)
    sys.modules[module].TOOLS.remove(sys.modules[module].refund)
    assert check(db_url, sid, workspace, recorded_names=False) == ([], 0, 1)
