"""MoveToWorkspace compaction: the compacted turns go to a dated log file the agent can read back.

Instead of a model-written summary (a call that can fail and costs money) or dropping the
turns, `compact --strategy workspace` appends them as plain markdown to
`memory/YYYY-MM-DD.md` in the workspace and leaves the model a one-line pointer to that file.
The log keeps the turns whole either way; this only decides what the model reads. The file
is written before the `Compacted` event is recorded: a crash between the two leaves the
turns in context and, on the next attempt, written twice — never lost. A compaction refused
when it records (the branch changed meanwhile) takes its block back out (`take_back`), so a
failure leaves the workspace as it found it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from chronicle.domain.content import TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.context import build_context

LOG_DIR = "memory"


def render_turns(turns: list[Any]) -> str:
    """The turns as a person would read them: input, the agent's text, each tool call and its result, shortened."""
    lines: list[str] = []
    for turn in turns:
        lines.append(f"### Turn {turn.number} ({turn.status})")
        for message in build_context([turn]):
            for block in message.content:
                if isinstance(block, TextBlock) and block.text.strip():
                    lines.append(f"**{message.role}:** {block.text.strip()}")
                elif isinstance(block, ToolUseBlock):
                    lines.append(f"- tool `{block.name}` {block.input}")
                elif isinstance(block, ToolResultBlock):
                    content = block.content if isinstance(block.content, str) else str(block.content)
                    lines.append(f"  → {'error: ' if block.is_error else ''}{content[:500]}")
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Moved:
    """What one move appended, and what it made, so that a compaction that fails can take it back."""

    relative: str
    block: str
    made_file: bool
    made_dir: bool


def append_turns(workspace: Path, session_id: Any, turns: list[Any], now: datetime) -> Moved:
    """Append the turns to today's log: what was written where, for `take_back`."""
    relative = f"{LOG_DIR}/{now.date().isoformat()}.md"
    path = workspace / relative
    made_dir = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    made_file = not path.exists()
    header = f"## Session {session_id}: {len(turns)} turn(s) moved here at {now.isoformat(timespec='seconds')}\n\n"
    block = header + render_turns(turns) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(block)
    return Moved(relative, block, made_file, made_dir)


def take_back(workspace: Path, moved: Moved) -> None:
    """Remove the block a move appended (wherever it is now: another session's compaction may have
    appended after it), then the file and the directory if the move made them and they are empty."""
    path = workspace / moved.relative
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    at = text.rfind(moved.block)
    if at >= 0:
        text = text[:at] + text[at + len(moved.block):]
        if text or not moved.made_file:
            path.write_text(text, encoding="utf-8")
        else:
            path.unlink()
    if moved.made_dir:
        try:
            path.parent.rmdir()
        except OSError:
            pass  # something else is in it now: it stays


def pointer(relative: str, count: int) -> str:
    return (f"{count} earlier turn(s) of this conversation were moved to the workspace file {relative}; "
            "read it with read_file if you need them.")
