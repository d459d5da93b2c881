"""Which schemas of Chronicle's own tools a session is offered: the edition it recorded when it started.

A request's fingerprint covers the tool schemas, and `replay` compares fingerprints. So a change to a
built-in tool's description or input schema made every session recorded before it replay as diverged at
its first model call, and a continued older session asked with schemas it had never been given. A tool
added later (`Tool.since_edition`) is offered from its edition on only: the tools a session has are
recorded on its spec, and an older session's new sub-agents are given tools by its edition. A new
session records TOOL_EDITION on its spec (`AgentSpec.tool_edition`); a tool whose schema changed keeps
its older editions (`Tool.schema_for`), so each session is offered what it was offered when it started,
and replays as identical after an upgrade. The user's tools and MCP tools are not versioned here: their
schemas come from the user's code and from the spec's recording.

tests/unit/test_tool_editions.py pins a digest of every edition: a schema changed without a new edition
fails there, naming this module.
"""

from __future__ import annotations

#: The edition a new session records.
TOOL_EDITION = 3

#: The first edition whose agents that may delegate get `list_tasks` (runtime/agents/registry.py): a session
#: recorded before it keeps the tool list its spec recorded, and its new sub-agents get none either.
LIST_TASKS_EDITION = 3

#: What each edition changed, newest last.
EDITIONS = {
    1: "the schemas of every session recorded before editions existed (a spec without tool_edition)",
    2: "delegate's task items take an optional task_id (a task on the session's board, seed 004's ClaimTask)",
    3: "edition 2 + list_tasks (the session's task board, so the model can find the task ids delegate claims), "
       "offered with delegate; delegate's description and task_id point to it",
}
