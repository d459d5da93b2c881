"""MoveToWorkspace compaction: the compacted turns go to a dated log file the agent can read back.

Instead of a model-written summary (a call that can fail and costs money) or dropping the
turns, `compact --strategy workspace` appends them as plain markdown to
`memory/YYYY-MM-DD.md` in the workspace and leaves the model a one-line pointer to that file,
naming the turns it holds (after an earlier compaction, those moved now; the text says what stands for the
others).
The log keeps the turns whole either way; this only decides what the model reads. The file
is written before the `Compacted` event is recorded: a crash between the two leaves the
turns in context and, on the next attempt, written twice — never lost. A compaction refused
when it records (the branch changed meanwhile) takes its block back out (`take_back`), so a
failure leaves the workspace as it found it.
"""

from __future__ import annotations

import json
import re
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
                    # JSON, as the model wrote the input and a person reads it (not Python's repr of a dict)
                    arguments = block.partial_input_json if block.cut else json.dumps(block.input, ensure_ascii=False)
                    lines.append(f"- tool `{block.name}` {arguments}")
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


def turn_span(numbers: list[int]) -> str:
    """Turn numbers as a person writes them: `3`, `1–3`, `1–2, 4` (an undone turn keeps its number)."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


def pointer(relative: str, numbers: list[int]) -> str:
    """The line naming the turns one move put in `relative`, by the numbers its `### Turn N` headings carry."""
    one = len(numbers) == 1
    return (f"{'Turn' if one else 'Turns'} {turn_span(numbers)} of this conversation {'was' if one else 'were'} moved to "
            f"the workspace file {relative}; read it with read_file if you need {'it' if one else 'them'}.")


#: A pointer line in a recorded compaction text: this module's, or the count-only one of releases before it.
POINTER = re.compile(r"(?:Turns? [0-9–, ]+|[0-9]+ earlier turn\(s\)) of this conversation (?:was|were) moved to the "
                     r"workspace file \S+; read it with read_file if you need (?:it|them)\.")


def moved_note(relative: str, numbers: list[int], earlier: int, before: str | None) -> str:
    """What the model reads after a move: which turns are in the file, and that the `earlier` turns compacted before
    (the branch's first) are not, with what is kept of them (`before`: the text that stood for them, None when they
    were only left out)."""
    line = pointer(relative, numbers)
    if not earlier:
        return line
    if before is None:
        return f"{line} The {earlier} earlier turn(s) are not in that file: they were left out of the context."
    if any(relative in found for found in POINTER.findall(before)):  # an earlier move to the same file (the same day)
        return f"{line} The {earlier} earlier turn(s) were compacted before; what is kept of them follows.\n\n{before}"
    return f"{line} The {earlier} earlier turn(s) are not in that file; what is kept of them follows.\n\n{before}"


def with_pointers(summary: str, before: str | None) -> str:
    """A summary made over a text that pointed to workspace files, with those pointers kept: the summary model may
    leave them out, and the turns are in those files still."""
    kept = [line for line in dict.fromkeys(POINTER.findall(before or "")) if line not in summary]
    if not kept:
        return summary
    return summary + "\n\nSome of the turns summarised here are also kept whole in the workspace:\n" + "\n".join(kept)
