"""The shapes of what events store inside their fields: the stored vocabulary, declared once.

Event fields that hold structure (a model response, a provider error, a tool's effects, an
agent's spec) are dicts at run time: that is what the transcoder decodes, and decoding a log of
100k events must not build a pydantic model per field (the rebuild and replay targets of issue 12
were met on dicts). They are declared here as TypedDicts instead, which cost nothing when an
event is decoded, let the type checker follow every reader, and are what
`runtime/vocabulary.py` validates a stored event against (`chronicle doctor`).

Two kinds of shape, told apart by `__pydantic_config__`:
- ours (flags, effects, marks, request deltas, spec): `extra: forbid`, a key nobody declared is
  a finding;
- the provider's (content blocks, usage, stop details): `extra: allow`, because a response is
  recorded with every field the API sent, including ones newer than this code.

Keys that events written by older versions lack are `NotRequired`; upcasters fill what the
current version reads, so the shapes are those of an event as decoded today.

Nothing imports this module to decode or record an event: the aggregates name these shapes in
their (string) annotations and import them for the type checker only, and the vocabulary resolves
the names when it is built. Creating these classes costs ≈ 1–3 ms, which every command would pay
otherwise. They are `typing`'s TypedDicts for the same reason (typing_extensions adds ≈ 7 ms);
the vocabulary hands pydantic equivalent ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict
from uuid import UUID

OURS = {"extra": "forbid"}
THEIRS = {"extra": "allow"}

#: A tool's input, as the model wrote it: any JSON object.
JSONObject = dict[str, Any]


class ContentBlock(TypedDict):
    """One block of a message or a tool result, as the API sent it or as we built it (text,
    tool_use, tool_result, image, document, thinking, or a type newer than this code)."""

    __pydantic_config__ = THEIRS  # type: ignore[misc]
    type: str


class Usage(TypedDict, total=False):
    __pydantic_config__ = THEIRS  # type: ignore[misc]
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class ProviderError(TypedDict):
    """A failed model call as data (domain/content.py ProviderError, dumped)."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    kind: str
    message: str
    status: int | None
    retry_after_s: float | None
    retryable: NotRequired[bool]


class RetryError(TypedDict):
    """A failed attempt as its retry records it (runtime/model_call.py `retry_error`): the error and,
    when the provider had already billed it (a stream broken after message_start), what it cost."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    kind: str
    message: str
    status: int | None
    retry_after_s: float | None
    usage: NotRequired[Usage]
    model: NotRequired[str]


class StoredResponse(TypedDict):
    """A model response as ModelResponded stores it: defaults left out (domain/stored_response.py),
    so only `content` and `stop_reason` are always there."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    content: list[ContentBlock]
    stop_reason: str
    usage: NotRequired[Usage]
    model: NotRequired[str]
    error: NotRequired[ProviderError | None]
    id: NotRequired[str]
    stop_sequence: NotRequired[str | None]
    stop_details: NotRequired[dict[str, Any] | None]
    raw: NotRequired[dict[str, Any]]
    request_id: NotRequired[str]


class RequestDelta(TypedDict, total=False):
    """What a ModelResponded keeps of its request (v3): enough to rebuild it."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    model: str
    max_tokens: int
    message_count: int
    #: The session's recorded extended-thinking budget, when it chose one (Session.ModelChanged).
    thinking_tokens: int


class TurnError(TypedDict, total=False):
    """Why a turn failed, as data: a provider error, a guard, a guardrail, a middleware or a hook."""

    __pydantic_config__ = THEIRS  # type: ignore[misc]
    kind: str
    message: str
    status: int | None
    retry_after_s: float | None
    retryable: bool
    guard: str
    guardrail: str
    middleware: str
    hook: str


class GuardrailMark(TypedDict):
    """What a guardrail changed, or that it failed open: digests and lengths, never the removed text."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    guardrail: str
    where: str
    action: Literal["modified", "error"]
    before_sha256: str
    before_chars: int
    after_sha256: NotRequired[str]
    after_chars: NotRequired[int]
    error: NotRequired[str]
    fail: NotRequired[str]


class MiddlewareMark(TypedDict):
    """A middleware's decision: its name and action, then whatever details it recorded."""

    __pydantic_config__ = THEIRS  # type: ignore[misc]
    middleware: str
    action: str


class ToolFlags(TypedDict, total=False):
    __pydantic_config__ = OURS  # type: ignore[misc]
    read_only: bool
    requires_approval: bool
    idempotent: bool
    parallel_safe: bool


class ToolEffect(TypedDict, total=False):
    """What a call changed outside the log: a file written (kind "file", with its text before and
    after, so `undo --files` can put it back) or a subtask run by spawn_batch (runtime/subtasks.py)."""

    __pydantic_config__ = THEIRS  # type: ignore[misc]
    kind: str
    path: str
    before: str | None
    after: str | None
    created_dirs: list[str]


class FileRestored(TypedDict):
    """One line of what `undo --files` / `redo --files` did."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    path: str
    action: str


class InputOrigin(TypedDict):
    """Where an input came from when it did not come from the session's own user: a channel and
    who sent it there (runtime/server/channels.py), recorded as given (a phone number, an email)."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    channel: str
    senders: list[str]
    #: Whether the turn's answer is to be posted back (the channel had a `reply_url` when it queued it).
    reply: bool


class ForkOrigin(TypedDict):
    __pydantic_config__ = OURS  # type: ignore[misc]
    session_id: str
    turn: int
    actor: NotRequired[str | None]


class InheritedNote(TypedDict):
    """A note a fork's board starts with (domain/notes.py `NoteBoard.Inherited`): as last written on the board it
    came from, with who wrote it then (the session and tool call) and when."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    name: str
    text: str
    session_id: UUID
    tool_call_id: UUID | None
    written_at: datetime


class SkillRecord(TypedDict):
    __pydantic_config__ = OURS  # type: ignore[misc]
    name: str
    sha256: str
    path: str
    body: str
    description: NotRequired[str]
    when_to_use: NotRequired[str]
    mode: NotRequired[str]
    version: NotRequired[str]
    files: NotRequired[list[str]]


class ApprovalRecord(TypedDict):
    """An approval policy as a spec records it (domain/approval_policy.py)."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    policy: str
    require: list[str]
    allow: list[str]
    source: str


class ProjectFileRecord(TypedDict):
    """AGENTS.md or TOOLS.md as a spec records it (domain/project_file.py)."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    name: str
    text: str
    redacted: dict[str, int]


class SpecRecord(TypedDict, total=False):
    """An agent's spec as its Session.Started records it (domain/agent_spec.py, dumped); fields
    added since a session started are absent from its record and take their defaults."""

    __pydantic_config__ = OURS  # type: ignore[misc]
    name: str
    description: str
    instructions: str
    provider: str
    model: str
    tools: list[str]
    max_iterations: int
    max_depth: int
    depth: int
    workspace: str
    registry: list[dict[str, Any]]  # sub-agent specs, each of this shape
    limits: dict[str, float | int | None] | None
    preamble: str
    skills: list[SkillRecord]
    memory: str
    memory_redacted: dict[str, int]
    trim_tool_results_after_turns: int
    trim_tool_results_to_chars: int
    compaction: dict[str, float | int | bool | None]  # Agent(compaction=...); absent when none was given
    mcp_tools: list[dict[str, Any]]
    guardrails: list[dict[str, Any]]
    middleware: list[dict[str, Any]]
    hooks: list[dict[str, Any]]
    approvals: ApprovalRecord  # domain/approval_policy.py; absent on specs that set none
    project_files: list[ProjectFileRecord]
    aux_model: str
    tool_edition: int  # runtime/tools/editions.py; absent on specs recorded before editions (edition 1)
    import_tools: dict[str, list[str]]  # names each import path of `tools` held; absent on older specs and when none
    prefix: str  # seed 004's display prefix (emoji and label); absent on older specs and when none was set
    instance: str  # seed 004's instance name of a sub-agent (domain/instance_names.py); absent on older specs and top-level ones
