"""Anthropic-format content blocks, messages, usage and model responses.

Blocks allow extra fields so that a response is recorded verbatim, including fields this
version does not know yet (citations, cache hints); thinking blocks keep their signature
because the API requires them back unchanged during tool use.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_serializer


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Block):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Block):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolUseBlock(_Block):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[
    Union[TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ToolResultBlock],
    Field(discriminator="type"),
]
BLOCKS = TypeAdapter(list[ContentBlock])

StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "error", "aborted"
]
#: Stop reasons of a response that the model actually finished and may be sent back.
FINISHED_STOP_REASONS = frozenset(
    {"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"}
)


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class ProviderError(BaseModel):
    """A failed model call as data: what happened and whether retrying could help."""

    model_config = ConfigDict(frozen=True)
    kind: str
    message: str
    status: int | None = None
    retryable: bool = False
    retry_after_s: float | None = None


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True)
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: StopReason = "end_turn"
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    error: ProviderError | None = None
    #: The provider's message id and the stop sequence that ended it, when there was one.
    id: str = ""
    stop_sequence: str | None = None
    #: The provider's own message when its shape is not ours (chat-completions), kept as it came.
    #: Left out of the dump when absent, so responses recorded before it existed look the same.
    raw: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_absent_raw(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if isinstance(data, dict) and data.get("raw") is None:
            data.pop("raw", None)
        return data

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def finished(self) -> bool:
        return self.stop_reason in FINISHED_STOP_REASONS


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def dump_blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    return [b.model_dump(mode="json") for b in blocks]


def load_blocks(data: list[dict[str, Any]]) -> list[Any]:
    return BLOCKS.validate_python(data)
