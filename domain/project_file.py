"""The workspace's files for agents (AGENTS.md, TOOLS.md) as recorded on a session's spec.

They are read once, when the session starts (runtime/project_files.py), with secrets cut out,
and recorded whole: the system prompt is built from the record, never from the file again, so
every later turn, a resume and a replay ask with exactly the text the first turn saw; a changed
file takes effect for new sessions.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ProjectFile(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    text: str
    #: Secrets cut out before recording, count per kind (runtime/secret_scan.py); {} when none.
    redacted: dict[str, int] = Field(default_factory=dict)


def project_prompt(files: tuple[ProjectFile, ...]) -> str:
    """The `<project_context>` section: each file under its name, in recorded order; "" for none."""
    if not files:
        return ""
    blocks = "\n".join(f'<file name="{f.name}">\n{f.text.strip()}\n</file>' for f in files)
    return ("<project_context>\nThe workspace's own instructions for agents working in it (follow them unless the user "
            f"says otherwise):\n{blocks}\n</project_context>")
