"""The messages of the next model call and their fingerprint, extended step by step.

Within a turn the context only grows: the prior turns are fixed, and a step, once its tool
results are recorded, never changes. Rebuilding the whole list (parsing every recorded block
through pydantic) and hashing all of it on every model call made a turn of N steps cost
O(N²); this keeps both and only parses and hashes what the last step added, so a step costs
the same at step 1,000 as at step 1.

The fingerprint is exactly `model_call.fingerprint(request)`: sha256 of the canonical JSON
of {messages, model, system, tools} (sorted keys, compact). With sorted keys the JSON opens
with the message list, so a running hash over `{"messages":[m1,m2,…` can be copied and
finished with the last message and the fixed tail. Same bytes in, same digest out: replay
compares fingerprints recorded before this existed without knowing about it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from chronicle.domain.content import Message
from chronicle.domain.context import first_sent_step, input_message, merge_roles, step_messages, steps_note_messages

OPENING = b'{"messages":['


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def closing(model: str, system: str, tools: list[dict[str, Any]]) -> bytes:
    """Everything after the message list in the canonical request JSON."""
    return b'],"model":' + canonical(model) + b',"system":' + canonical(system) + b',"tools":' + canonical(tools) + b"}"


class RequestContext:
    """One turn's growing context: call `messages(turn)` before each model call, then `fingerprint`."""

    def __init__(self, prior: list[Message]) -> None:
        self.prior = list(prior)
        self._turn_id: Any = None
        self._steps = 0
        #: The first step sent verbatim (the steps before it were compacted: Turn.IterationsCompacted).
        self._first = 0
        self._messages: list[Message] = []
        #: sha256 over OPENING + every message but the last (the last may still be merged into).
        self._hash = hashlib.sha256(OPENING)
        self._hashed = 0
        self._hashed_size = 0
        self._last_bytes: bytes | None = None

    def messages(self, turn: Any) -> list[Message]:
        """Prior context + the turn's input + its recorded steps, role-merged as the API wants them."""
        if (turn.id != self._turn_id or len(turn.steps) < self._steps or turn.open_step is not None
                or first_sent_step(turn) != self._first):
            self._reset(turn)  # a compaction of the turn's steps changes what it starts with: built again
        for step in turn.steps[self._steps:]:
            self._append(step_messages(step))
        self._steps = len(turn.steps)
        return list(self._messages)

    def fingerprint_of(self, request: Any) -> str:
        """`fingerprint(request)`, incrementally when the request carries the messages last built here."""
        mine = self._messages
        theirs = request.messages
        if len(theirs) == len(mine) and (not mine or theirs[-1] is mine[-1]) and self._turn_id is not None:
            return self.fingerprint(request.model, request.system, request.tools)
        from .model_call import fingerprint

        return fingerprint(request)

    def fingerprint(self, model: str, system: str, tools: list[dict[str, Any]]) -> str:
        """The fingerprint of a request carrying the messages last returned by `messages`."""
        digest = self._hash.copy()
        if self._messages:
            if self._last_bytes is None:
                self._last_bytes = canonical(self._messages[-1].wire())
            if self._hashed:
                digest.update(b",")
            digest.update(self._last_bytes)
        digest.update(closing(model, system, tools))
        return digest.hexdigest()

    def size(self, turn: Any) -> int:
        """The bytes of the canonical JSON of `messages(turn)`: what the context monitor estimates a
        request from inside a turn (runtime/turn_compaction.py), kept as the messages grow instead
        of dumping every message again before every call."""
        self.messages(turn)
        if not self._messages:
            return 0
        if self._last_bytes is None:
            self._last_bytes = canonical(self._messages[-1].wire())
        return self._hashed_size + len(self._last_bytes)

    def _reset(self, turn: Any) -> None:
        self._turn_id = turn.id
        self._steps = 0
        self._messages = []
        self._hash = hashlib.sha256(OPENING)
        self._hashed = 0
        self._hashed_size = 0
        self._last_bytes = None
        self._first = self._steps = first_sent_step(turn)
        self._append([*self.prior, input_message(turn), *steps_note_messages(turn)])
        if turn.open_step is not None:
            # Not a state a model call is made from; build it exactly, but cache nothing of the turn.
            self._turn_id = None

    def _append(self, new: list[Message]) -> None:
        for message in new:
            if self._messages and self._messages[-1].role == message.role:
                self._messages[-1] = merge_roles([self._messages[-1], message])[0]
                self._last_bytes = None
                continue
            if self._messages:
                # The previous last message is final now: fold it into the running hash.
                self._hash.update(b"," if self._hashed else b"")
                final = self._last_bytes or canonical(self._messages[-1].wire())
                self._hash.update(final)
                self._hashed += 1
                self._hashed_size += len(final)
            self._messages.append(message)
            self._last_bytes = None
