"""Replay of a tool that ran spawn_batch: its subtasks are compared with their own records.

A subtask has no tool call of its own: it shares its caller's id, and what it returned is recorded
only through the caller's result and as a mark among the caller's effects (tool, input, is_error,
SHA-256 and length of the output; runtime/subtasks.py). So replay cannot look a subtask's result up
as it does a call's: a replayed read-only subtask runs, the marks its batch leaves are compared
with the recorded ones in order once the caller ends, and the first that differs is named — before
the caller's own result, which differs only because of it. A recorded batch that ran a subtask which
is not read-only cannot run again, so replay answers its caller from the recording, like a writer.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from ..subtasks import refusal
from ..tools.base import Toolbox

#: What must be equal in a recorded and a replayed mark for the subtask to count as unchanged.
ASKED = ("tool", "input")
RETURNED = ("is_error", "output_sha256", "output_chars", "unfinished")


def subtask_marks(effects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The subtask marks among a call's effects, in the order the subtasks were asked for."""
    return [e for e in effects if "subtask" in e]


def ran_a_writer(effects: list[dict[str, Any]], toolbox: Toolbox) -> bool:
    """Whether the recorded batch ran a subtask that is not read-only (an idempotent one): not to be run again."""
    for mark in subtask_marks(effects):
        tool = toolbox.get(mark["tool"])
        if refusal(tool, mark["tool"]) is None and tool is not None and not tool.read_only:
            return True
    return False


def _field(mark: dict[str, Any], key: str) -> Any:
    return to_jsonable_python(mark.get(key))  # as the store gives it back: tuples as lists


def difference(caller: str, recorded: list[dict[str, Any]], replayed: list[dict[str, Any]], shown: dict[int, str]) -> str | None:
    """How the replayed batch of `caller` first differs from the recorded one, or None. `shown` holds the
    replayed subtasks' outputs, by place, as the message should show them (the recording has only a digest)."""
    for place, (was, now) in enumerate(zip(recorded, replayed, strict=False)):  # a count that differs is named after
        name = f"subtask {now.get('subtask', place)} of {caller}"
        if any(_field(was, k) != _field(now, k) for k in ASKED):
            return f"{name} asks {now['tool']} {_json(now['input'])}, recorded {was['tool']} {_json(was['input'])}"
        if any(_field(was, k) != _field(now, k) for k in RETURNED):
            got = shown.get(place, f"{now.get('output_chars', '?')} character(s)")
            if was.get("unfinished"):
                had = "it unfinished"
            else:
                had = (f"{'an error of ' if was.get('is_error') else ''}{was.get('output_chars')} character(s) "
                       f"with SHA-256 {str(was.get('output_sha256'))[:12]}…")
            return f"{name}: {now['tool']} returned {'an error ' if now.get('is_error') else ''}{got}; the recording has {had}"
    if len(recorded) != len(replayed):
        return f"{caller} ran {len(replayed)} subtask(s); the recording has {len(recorded)}"
    return None


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), sort_keys=True, ensure_ascii=False)
