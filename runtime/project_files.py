"""AGENTS.md and TOOLS.md: what the workspace tells every agent working in it, recorded at session start.

Read once when a top-level session starts and recorded on its spec (domain/project_file.py), so
later turns, resume and replay read the recorded text, never the file again. A sub-agent gets its
parent's recorded AGENTS.md and TOOLS.md (seed 003; seed 000 gives it AGENTS.md only, and tool
notes help a worker as much as its lead), and no MEMORY.md: it is handed a task, not the
conversation.

Which of the seeds' bootstrap files Chronicle reads, and why not the others: AGENTS.md (the
project's conventions, the file other coding agents read too), TOOLS.md (notes on the tools and
the environment), MEMORY.md (runtime/memory.py). HEARTBEAT.md is already the heartbeat routine's
input, not a system prompt; SOUL.md, IDENTITY.md and USER.md describe a personal assistant's
persona, which here is the agent's `instructions` (chronicle.toml or Agent(instructions=...)).

The text is scanned for secrets before it is recorded (the counts are kept on the record): the
agent can write these files, and whatever a session records stays in the log for good. A file
over MAX_FILE_CHARS, one that is not UTF-8 text, or a link leading out of the workspace is
refused with one line naming it, before anything is recorded: it would go into every request.
"""

from __future__ import annotations

from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.project_file import ProjectFile

from .skills import SkillError

#: Read for a top-level agent, in this order.
PROJECT_FILES = ("AGENTS.md", "TOOLS.md")
#: What a sub-agent is given of its parent's.
SUBAGENT_FILES = frozenset({"AGENTS.md", "TOOLS.md"})
MAX_FILE_CHARS = 32_000
OFF_SWITCH = "[agent] bootstrap = false in chronicle.toml (Agent(bootstrap=False) in code) starts sessions without them"


class ProjectFileError(SkillError):
    """AGENTS.md or TOOLS.md cannot be used as it is; the message says why and how to go on."""


def read_project_file(workspace: Path, name: str) -> ProjectFile | None:
    path = workspace / name
    if not path.is_file():
        return None
    try:
        inside = path.resolve().is_relative_to(workspace.resolve())
    except OSError:
        inside = False
    if not inside:
        raise ProjectFileError(f"{path} leads outside the workspace; only a file in it is read ({OFF_SWITCH})")
    try:
        if path.stat().st_size > 4 * MAX_FILE_CHARS:  # a huge file is refused without reading it whole
            raise ProjectFileError(f"{path}: {path.stat().st_size} bytes; keep it under {MAX_FILE_CHARS} characters "
                                   f"(it goes into every request), or {OFF_SWITCH}")
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectFileError(f"{path}: cannot read it as UTF-8 text: {exc}") from None
    if len(text) > MAX_FILE_CHARS:
        raise ProjectFileError(f"{path}: {len(text)} characters; keep it under {MAX_FILE_CHARS} (it goes into every request), "
                               f"or {OFF_SWITCH}")
    if not text:
        return None
    from .secret_scan import scanner_for

    found = scanner_for(workspace).text(text)
    return ProjectFile(name=name, text=found.value, redacted=found.counts)


def read_project_files(workspace: Path) -> tuple[ProjectFile, ...]:
    return tuple(f for f in (read_project_file(workspace, name) for name in PROJECT_FILES) if f is not None)


def with_project_files(spec: AgentSpec, workspace: Path) -> AgentSpec:
    return spec.model_copy(update={"project_files": read_project_files(workspace)})


def for_subagent(parent: AgentSpec) -> tuple[ProjectFile, ...]:
    """The parent's recorded files a sub-agent is given: never read again, so parent and child agree."""
    return tuple(f for f in parent.project_files if f.name in SUBAGENT_FILES)
