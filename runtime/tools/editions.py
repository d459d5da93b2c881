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

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

#: The edition a new session records.
TOOL_EDITION = 5

#: The first edition whose agents that may delegate get `list_tasks` (runtime/agents/registry.py): a session
#: recorded before it keeps the tool list its spec recorded, and its new sub-agents get none either.
LIST_TASKS_EDITION = 3

#: The first edition whose new sub-agents' recorded prompts open with seed 004's `<identity>` and `<completion_protocol>`
#: (runtime/agents/registry.py `child_spec`): an older session's new sub-agents are prompted as its release did.
COMPLETION_PROTOCOL_EDITION = 4

#: The first edition whose new sub-agents that may delegate further are told whom, as the top-level agent is
#: (seed 004's `<available_agents>`, the last section of their recorded prompt): an older session's are not.
SUB_AGENT_DIRECTORY_EDITION = 5

#: What each edition changed, newest last.
EDITIONS = {
    1: "the schemas of every session recorded before editions existed (a spec without tool_edition)",
    2: "delegate's task items take an optional task_id (a task on the session's board, seed 004's ClaimTask)",
    3: "edition 2 + list_tasks (the session's task board, so the model can find the task ids delegate claims), "
       "offered with delegate; delegate's description and task_id point to it",
    4: "edition 3's schemas; a new sub-agent's system prompt opens with <identity> (its instance name) and "
       "<completion_protocol> (seed 004): end the delegated task by calling task_complete",
    5: "edition 4's schemas; a new sub-agent that may delegate further ends its system prompt with <available_agents>, "
       "as the top-level agent's does (seed 004)",
}


@dataclass(frozen=True)
class EarlierSchemas:
    """Chronicle's own tools as a release before editions offered them: what differs from edition 1.

    Edition 1 is what the last release before editions offered (commit cc3fc6f); releases before that
    changed a few descriptions and a schema without recording anything, so a session they recorded reads
    as edition 1 yet was asked with other schemas. Which of these it was is not on its spec: replay finds it
    by the recorded fingerprint of the session's first model call (runtime/app/replay.py), and a set is
    used only when it gives exactly the recorded request. tests/unit/test_tool_editions.py pins each set.
    """

    name: str
    #: Which releases offered them (what the verdict and the docs say).
    releases: str
    #: Built-in tools whose description read otherwise then: name -> description.
    descriptions: Mapping[str, str] = field(default_factory=dict)
    #: Input properties a built-in tool did not have yet: name -> properties.
    without: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def apply(self, schema: dict[str, Any]) -> dict[str, Any]:
        """A built-in tool's edition-1 schema as these releases offered it."""
        name = schema["name"]
        if name in self.descriptions:
            schema = {**schema, "description": self.descriptions[name]}
        if name in self.without:
            inputs = copy.deepcopy(schema["input_schema"])
            for prop in self.without[name]:
                inputs.get("properties", {}).pop(prop, None)
                if prop in inputs.get("required", ()):
                    inputs["required"] = [r for r in inputs["required"] if r != prop]
            schema = {**schema, "input_schema": inputs}
        return schema


#: Before the tool sandbox (merged 2026-11-23, c75033f), six tools' descriptions said less.
_BEFORE_SANDBOX = {
    "list_dir": "List a directory in the workspace; directories end with '/'.",
    "glob": "Find workspace files whose relative path matches a glob pattern such as '**/*.py'.",
    "grep": "Search workspace files for a regular expression; prints path:line:text.",
    "write_file": "Create or overwrite a text file in the workspace.",
    "edit_file": "Replace one exact occurrence of `old` with `new` in a workspace file.",
    "bash": "Run a shell command in the workspace directory; returns its output and exit code.",
}

#: What releases before editions offered, newest first (the order replay tries them in).
BEFORE_EDITIONS: tuple[EarlierSchemas, ...] = (
    EarlierSchemas(
        "before tests_run", "releases of 2026-11-23 to 2026-11-28, before task_complete took tests_run (d311398)",
        without={"task_complete": ("tests_run",)},
    ),
    EarlierSchemas(
        "before the tool sandbox", "releases before 2026-11-23, before the tool sandbox (c75033f) rewrote six descriptions",
        descriptions=_BEFORE_SANDBOX, without={"task_complete": ("tests_run",)},
    ),
)


def builtin_tool(tool: object) -> bool:
    """Whether `tool` is one of Chronicle's own (or replay's stand-in for one), which editions describe;
    a user's tool of the same name is not."""
    from ..agents.tools import ORCHESTRATION_TOOLS
    from ..skills import LoadSkill
    from . import BUILTIN_TOOLS

    own = BUILTIN_TOOLS.get(getattr(tool, "name", "")) or ORCHESTRATION_TOOLS.get(getattr(tool, "name", ""))
    if getattr(tool, "name", "") == LoadSkill.name:
        own = LoadSkill
    return own is not None and isinstance(tool, own)
