"""Skills as recorded on an agent's spec: the exact text the model may see, with its hash.

A skill is read from disk once, when a session starts, and recorded whole (body, sha256,
version, the files beside it) on the session's spec. The system prompt and `load_skill`
are built from that record, never from the file again, so a resumed or replayed session
sees byte for byte what the original saw even if SKILL.md has changed since.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SkillMode = Literal["inline", "on_demand"]


class SkillRecord(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str = ""
    when_to_use: str = ""
    mode: SkillMode = "on_demand"
    #: The front matter's `version`, or "" when the file gives none; sha256 identifies the text anyway.
    version: str = ""
    sha256: str
    path: str
    body: str
    #: Files beside SKILL.md (relative to its folder), listed by `load_skill`.
    files: tuple[str, ...] = ()


def skills_prompt(skills: tuple[SkillRecord, ...]) -> str:
    """The `<skills>` (inline bodies) and `<available_skills>` (on-demand index) sections, in recorded order."""
    inline = [s for s in skills if s.mode == "inline"]
    on_demand = [s for s in skills if s.mode == "on_demand"]
    parts: list[str] = []
    if inline:
        blocks = [f'<skill name="{s.name}">\n{s.body.strip()}\n</skill>' for s in inline]
        parts.append("<skills>\n" + "\n".join(blocks) + "\n</skills>")
    if on_demand:
        lines = []
        for s in on_demand:
            line = f"- {s.name}: {s.description or '(no description)'}"
            if s.when_to_use:
                line += f" (use when: {s.when_to_use})"
            lines.append(line)
        parts.append(
            "<available_skills>\nCall load_skill with a skill's name to read its full procedure before following it.\n"
            + "\n".join(lines) + "\n</available_skills>"
        )
    return "\n\n".join(parts)
