"""A conversation as one JSON array of wire messages, put together as text from stored wire rows.

The history projection stores each message's blocks as the model is sent them (`wire`). A read
of the past only joins them: parsing 2,000 messages to serialise them again would cost more
than the query. The projection also stores runs of whole turns joined this way (spans), so
the joining rules live here, where both the writer and the readers (runtime/past_context.py,
runtime/past_wire.py) take them from: one definition of what `domain.context.assemble_context`
sends, as text.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

#: (role, content as wire JSON text) of one message.
Part = tuple[str, str]


class Segment(NamedTuple):
    """Consecutive messages already joined: their JSON array, and the roles of its first and
    last message (a neighbour of the same role merges into it)."""

    first_role: str
    last_role: str
    text: str


def shown_messages(rows: Iterable[tuple[Any, ...]]) -> list[Part]:
    """(role, wire JSON) of what `domain.context.turn_messages` shows of a turn, over its
    projection rows (seq, step, role, stop_reason, wire): nothing of a refused turn (marked too,
    so normally read from events); else each row the projection found sent, if it has blocks."""
    rows = list(rows)
    if any(row[3] == "refusal" for row in rows):
        return []
    return [(row[2], row[4]) for row in rows if row[4] is not None and row[4] != "[]"]


def segment(parts: Iterable[list[Part]], summary_wire: str | None = None) -> Segment | None:
    """Turns' messages (and a summary's blocks first) joined as `assemble_context` joins them:
    consecutive messages of one role merged. None when there is no message."""
    roles: list[str] = []
    contents: list[str] = []
    if summary_wire is not None:
        roles.append("user")
        contents.append(summary_wire)
    for turn in parts:
        for role, content in turn:
            if roles and roles[-1] == role:
                contents[-1] = _concat(contents[-1], content)
            else:
                roles.append(role)
                contents.append(content)
    if not roles:
        return None
    return Segment(roles[0], roles[-1], "[" + ",".join(_message(r, c) for r, c in zip(roles, contents, strict=True)) + "]")


def joined(segments: Iterable[Segment | None]) -> str:
    """Segments in order as one JSON array, where one's last message and the next one's first
    share a role merged into one message, as `segment` would have merged them."""
    pieces: list[str] = []  # joined once at the end: adding to one growing string copies it each time
    last_role = None
    for seg in segments:
        if seg is None:
            continue
        if not pieces:
            pieces.append(seg.text[:-1])
        elif last_role != seg.first_role:
            pieces.append("," + seg.text[1:-1])
        else:
            # `...,{"role":R,"content":[a]}` and `[{"role":R,"content":[b]},...]` become
            # `...,{"role":R,"content":[a,b]},...`: no message's content is empty (`shown_messages`).
            head = f'[{{"role":"{seg.first_role}","content":['
            assert seg.text.startswith(head) and pieces[-1].endswith("]}"), "not a segment's text"
            pieces[-1] = pieces[-1][:-2]
            pieces.append("," + seg.text[len(head):-1])
        last_role = seg.last_role
    return "".join(pieces) + "]" if pieces else "[]"


def joined_values(segments: Iterable[Segment | None], parse: Callable[[str], Any]) -> list[dict[str, Any]]:
    """`parse(joined(segments))` without the joined text: each segment parsed alone, and its first
    message merged into the message before it where `joined` merges them (one role either side
    of the seam). Joining copied a long read's text twice into new memory, whose page faults
    were most of 0.45 ms in a read of 450 KB, half as long as parsing it."""
    messages: list[dict[str, Any]] = []
    last_role = None
    for seg in segments:
        if seg is None:
            continue
        values = parse(seg.text)
        if messages and last_role == seg.first_role:
            messages[-1]["content"].extend(values[0]["content"])
            messages.extend(values[1:])
        else:
            messages.extend(values)
        last_role = seg.last_role
    return messages


def _message(role: str, content: str) -> str:
    return f'{{"role":"{role}","content":{content}}}'


def _concat(left: str, right: str) -> str:
    """Two JSON arrays as one, textually."""
    if left == "[]":
        return right
    if right == "[]":
        return left
    return left[:-1] + "," + right[1:]
