"""Replay of a session an earlier release recorded: the tool schemas it was asked with, or why its request cannot be rebuilt.

Replay compares each request's fingerprint, a digest of model, system prompt, tool schemas and messages
together, so a difference alone does not say which of them moved. Two things tell more for older sessions:

- Chronicle's own tools changed descriptions and a schema before tool editions existed, so a session whose
  spec records no edition may have been asked with any of the sets in `BEFORE_EDITIONS`
  (runtime/tools/editions.py). The one that gives exactly the recorded fingerprint of its first model
  call is the one it was asked with (`earlier_schemas`), and the replay asks with it from then on.
- Releases before schema v3 stored, beside the fingerprint, a digest of the system prompt and one of the
  tool schemas (`system_sha256`, `tools_sha256`: v1 and v2 of Turn.ModelResponded, which the v3 upcaster
  leaves out as nothing else reads them). Read from the stored row, they name the part that differs.

When the request still cannot be rebuilt, `explain` says which part differs and why, as the divergence
kind `earlier release` (exit 1, as every divergence: scripts that check for 1 keep working, and the kind
tells the two apart), rather than a bare fingerprint: a release that recorded a session may have
offered its loop a tool the spec does not record (tests/fixtures/v2_store.db was written so), which no later
code can put back.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from chronicle.domain.turn import Turn

from ..model_call import fingerprint
from ..providers.base import ModelRequest
from ..store import ChronicleStore
from ..store_rows import as_uuid, event_rows
from ..tools.base import Toolbox
from ..tools.editions import BEFORE_EDITIONS, EarlierSchemas, builtin_tool

#: The divergence kind of a session recorded by an earlier release whose request cannot be rebuilt.
EARLIER_RELEASE = "earlier release"


def earlier_schemas(toolbox: Toolbox, request: ModelRequest, recorded: str) -> tuple[EarlierSchemas, str] | None:
    """The built-in tools' schemas of a release before editions that give `request` the `recorded`
    fingerprint, and that fingerprint; None if none does (or none differs from what was asked)."""
    for earlier in BEFORE_EDITIONS:
        schemas = toolbox.schemas_as(earlier)
        if schemas == request.tools:
            continue
        now = fingerprint(request.model_copy(update={"tools": schemas}))
        if now == recorded:
            return earlier, now
    return None


class RecordedState:
    """Any stored event's state as it was stored: eventsourcing decodes (and decrypts) it for this class,
    whose class_version 1 has no upcaster to run, and the store's mapper lets it read a state of any class_version."""

    originator_id: UUID
    reads_as_stored = True


def recorded_request(store: ChronicleStore, turn_id: UUID, step: int) -> dict[str, Any]:
    """The `request_delta` a step's Turn.ModelResponded holds as stored, not upcast ({} if it cannot be read)."""
    try:
        for _, oid, version, _topic, state in event_rows(store, [turn_id], topic_suffix=".ModelResponded"):
            stored = StoredEvent(originator_id=as_uuid(oid), originator_version=version,
                                 topic=f"{__name__}:{RecordedState.__qualname__}", state=bytes(state))
            found = vars(store.mapper.to_domain_event(stored))
            if found.get("step") == step:
                return dict(found.get("request_delta") or {})
    except Exception:  # noqa: BLE001 - a row that does not read tells nothing more; the fingerprint still says it diverged
        return {}
    return {}


def _sha(value: Any) -> str:
    """As releases before schema v3 digested the system prompt and the tools (runtime/model_call.py then)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def called_tools(turns: list[Turn]) -> list[str]:
    """The tools the recorded branch's model called, in order of first call."""
    names: dict[str, None] = {}
    for turn in turns:
        for step in turn.steps:
            for block in step["response"].get("content", []):
                if block.get("type") == "tool_use":
                    names.setdefault(str(block.get("name")), None)
    return list(names)


@dataclass(frozen=True)
class Explained:
    kind: str
    detail: str
    #: model, system, tools, messages: "as recorded", "changed", or "not recorded" (nothing tells);
    #: messages also "same count" (only their number is recorded apart).
    parts: dict[str, str]


def explain(
    store: ChronicleStore, turn: Turn, step: int, request: ModelRequest, recorded: dict[str, Any], now: str,
    toolbox: Toolbox, branch: list[Turn], edition: int,
) -> Explained:
    """Why the request of `turn`'s `step` is not the recorded one, as far as the recording tells."""
    stored = recorded_request(store, turn.id, step)
    count = stored.get("message_count", recorded.get("message_count"))
    parts = {
        "model": "not recorded" if not stored.get("model") else "as recorded" if stored["model"] == request.model else "changed",
        "system": _part(stored.get("system_sha256"), request.system),
        "tools": _part(stored.get("tools_sha256"), request.tools),
        "messages": "not recorded" if count is None else "same count" if count == len(request.messages) else "changed",
    }
    if all(parts[k] == "as recorded" for k in ("model", "system", "tools")):
        parts["messages"] = "changed"  # the only part left that the fingerprint covers
    unrecorded = [n for n in called_tools(branch) if toolbox.get(n) is None]
    if unrecorded:
        parts["tools"] = "changed"  # offered a tool the toolbox does not hold
    before_v3 = "tools_sha256" in stored or "system_sha256" in stored
    fingerprints = (f"recorded {recorded['fingerprint'][:12]}… ({recorded.get('message_count', '?')} message(s)), "
                    f"now {now[:12]}… ({len(request.messages)} message(s))")
    if not before_v3 and not unrecorded:
        tried = (f"; recorded before tool editions: edition 1 and the built-in tools' schemas of the releases before it "
                 f"({', '.join(e.name for e in BEFORE_EDITIONS)}) were tried" if edition == 1 else "")
        return Explained("request fingerprint", fingerprints + tried, parts)
    said = []
    if before_v3:
        said.append("its events predate schema v3")
    if edition == 1:
        said.append("its spec predates tool editions")
    why = [f"recorded by an earlier release ({'; '.join(said)})" if said else "recorded by an earlier release",
           "its request cannot be rebuilt"]
    changed = [k for k, v in parts.items() if v == "changed"]
    if "tools" in changed and stored.get("tools_sha256"):
        why.append(f"the tool schemas differ from those recorded (digest {str(stored['tools_sha256'])[:12]}… recorded, "
                   f"{_sha(request.tools)[:12]}… now; Chronicle's earlier built-in schemas do not give it either)")
    if unrecorded:
        why.append(f"the recording called {', '.join(unrecorded)}, which the session's recorded tools "
                   f"({', '.join(toolbox.names()) or 'none'}) do not hold: the release that recorded it let a program "
                   "offer the loop tools its spec does not record")
    user_tools = [n for n, t in toolbox.tools.items() if not builtin_tool(t)]
    if "tools" in changed and user_tools and not unrecorded:
        why.append(f"the session's own tools ({', '.join(user_tools)}) are not versioned: a change to them shows here too")
    if "system" in changed:
        why.append(f"the system prompt differs from the one recorded ({len(request.system)} characters now)")
    if "model" in changed:
        why.append(f"the model differs (recorded {stored.get('model')}, now {request.model})")
    if "messages" in changed:
        why.append(f"the messages differ ({count} recorded, {len(request.messages)} now)" if count != len(request.messages)
                   else "the messages' wire form differs (model, system prompt and tools are as recorded)")
    same = [k for k in ("model", "system", "tools") if parts[k] == "as recorded"]
    if same:
        named = {"model": f"the model ({request.model})", "system": "the system prompt", "tools": "the tool schemas"}
        why.append(f"{' and '.join(named[k] for k in same)} {'is' if len(same) == 1 else 'are'} as recorded"
                   + (f", and so is the number of messages ({count})" if parts["messages"] == "same count" else ""))
    return Explained(EARLIER_RELEASE, "; ".join(why) + f" ({fingerprints})", parts)


def _part(digest: Any, value: Any) -> str:
    if not digest:
        return "not recorded"
    return "as recorded" if digest == _sha(value) else "changed"
