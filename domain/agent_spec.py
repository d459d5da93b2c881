"""What an agent is: recorded on its Session so that resume, replay and audit know it exactly.

A sub-agent's spec is resolved when it is spawned (depth, limits, tools) and recorded whole on
its own Session; `registry` carries the sub-agent definitions a session may delegate to, so a
resumed session never needs the registry file it started from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .skill import SkillRecord, skills_prompt


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = "main"
    description: str = ""
    instructions: str = ""
    provider: str = ""
    model: str = ""
    tools: tuple[str, ...] = ()
    max_iterations: int = 20
    max_depth: int = 1
    depth: int = 0
    workspace: str = ""
    #: Sub-agent definitions known when this session started (see runtime/agents/registry.py).
    registry: tuple["AgentSpec", ...] = ()
    #: Skills found when the session started, recorded whole (runtime/skills.py); () for older sessions.
    skills: tuple[SkillRecord, ...] = ()
    #: MEMORY.md of the workspace as it read when the session started (runtime/memory.py); "" for none.
    memory: str = ""
    #: Effects (runtime/effects.py): tool results of turns this many turns old are trimmed in the context; 0 = never.
    trim_tool_results_after_turns: int = 0
    trim_tool_results_to_chars: int = 200

    @property
    def may_delegate(self) -> bool:
        """Delegation is allowed above the depth limit only: a child sits at depth + 1."""
        return self.depth < self.max_depth

    @property
    def system_prompt(self) -> str:
        """The instructions, then MEMORY.md and the skills as recorded; exactly the instructions when there
        are none, so sessions recorded before memory and skills existed keep their request fingerprints."""
        parts = [self.instructions] if self.instructions else []
        if self.memory:
            parts.append(f"<memory>\n{self.memory.strip()}\n</memory>")
        section = skills_prompt(self.skills)
        if section:
            parts.append(section)
        return "\n\n".join(parts)


AgentSpec.model_rebuild()
