"""MEMORY.md: what the workspace wants every new session to know, recorded on the session's spec.

Read once when a top-level session starts (`run`, `chat`, `submit`, routines) and recorded
whole on its spec, so the system prompt of a resumed or replayed session is the one its first
turn saw, whatever the file says later. Sub-agents do not get it: they are handed a task, not
the conversation. Chronicle has no group chats; a session is one person's conversation (and
one thread, see docs/agents.md, "Memory, threads"), so nothing is excluded.
"""

from __future__ import annotations

from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec

from .skills import SkillError

MEMORY_FILE = "MEMORY.md"
MAX_MEMORY_CHARS = 32_000


class WorkspaceMemoryError(SkillError):
    """MEMORY.md cannot be used as it is; the message says why."""


def read_memory(workspace: Path) -> str:
    path = workspace / MEMORY_FILE
    if not path.is_file():
        return ""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkspaceMemoryError(f"{path}: cannot read it as UTF-8 text: {exc}") from None
    if len(text) > MAX_MEMORY_CHARS:
        raise WorkspaceMemoryError(f"{path}: {len(text)} characters; keep it under {MAX_MEMORY_CHARS} (it goes into every request)")
    return text


def with_memory(spec: AgentSpec, workspace: Path) -> AgentSpec:
    """The file's text with secrets cut out first (the agent can write it; the log keeps what it records for good)."""
    text = read_memory(workspace)
    if not text:
        return spec.model_copy(update={"memory": ""})
    from .secret_scan import scanner_for

    found = scanner_for(workspace).text(text)
    return spec.model_copy(update={"memory": found.value, "memory_redacted": found.counts})
