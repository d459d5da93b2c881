"""Seed 004's instance names: `<agent>-<task slug>-<n>`, e.g. `researcher-parsing-2`.

Two children of one agent definition, spawned together or one after another, are distinct sessions with
distinct ids, but `log`, `run`'s live lines and the parent's delegate result all said `researcher` for both.
The instance name tells them apart where people read them; the agent's own name (its definition, the
`agent` field everywhere) still decides what it may do and whom it may be delegated to. It is recorded on
the child's spec when it starts, so every process and every later read says the same.
"""

from __future__ import annotations

import re

#: Words that say nothing about which task it is.
_FILLER = frozenset(
    "a an and are as at be by can could do does for from how i in into is it its me my of on or our please "
    "should that the their then this to us was we what when where which who why will with would you your".split()
)
_WORD = re.compile(r"[^\W_]+")
MAX_SLUG = 24


def task_slug(task: str) -> str:
    """The first two telling words of the task's first line, lowercase, joined by '-'; 'task' if none."""
    first = task.strip().splitlines()[0] if task.strip() else ""
    words = [w for w in _WORD.findall(first.lower()) if w not in _FILLER and not w.isdigit()][:2]
    slug = "-".join(words)[:MAX_SLUG].strip("-")
    return slug or "task"


def instance_name(agent: str, task: str, n: int) -> str:
    """The n-th (1-based) instance of `agent` its parent spawned, named for its task."""
    return f"{agent}-{task_slug(task)}-{n}"
