"""Anthropic-format content blocks, messages, usage and model responses.

Blocks allow extra fields so that a response is recorded verbatim, including fields this
version does not know yet (citations, cache hints); thinking blocks keep their signature
because the API requires them back unchanged during tool use. A block of a type we do not
model (`server_tool_use`, `web_search_tool_result`, whatever the API adds next) is an
`OtherBlock`: kept and sent back as it came, never a reason to reject a good response.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

from .wire_blocks import FINISHED_STOP_REASONS as FINISHED_STOP_REASONS  # the models' users import them from here
from .wire_blocks import PARTIAL_INPUT_KEY as PARTIAL_INPUT_KEY


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)


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

    @property
    def cut(self) -> bool:
        """The stream ended (max_tokens, a break) inside this call's input: `input` is not the model's."""
        return PARTIAL_INPUT_KEY in (self.model_extra or {})

    @property
    def partial_input_json(self) -> str | None:
        return (self.model_extra or {}).get(PARTIAL_INPUT_KEY)


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


class ImageBlock(_Block):
    """An image the user sent; its `source` names stored bytes until the request is sent (domain/attachment.py)."""

    type: Literal["image"] = "image"
    source: dict[str, Any]


class DocumentBlock(_Block):
    """A PDF the user sent; stored and referenced like an image."""

    type: Literal["document"] = "document"
    source: dict[str, Any]


class OtherBlock(_Block):
    """Any block type this version does not model, with every field the API sent."""

    type: str


KNOWN_BLOCK_TYPES = frozenset({"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document"})


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in KNOWN_BLOCK_TYPES and not isinstance(value, OtherBlock) else "other"


ContentBlock = Annotated[
    Union[
        Annotated[TextBlock, Tag("text")], Annotated[ThinkingBlock, Tag("thinking")],
        Annotated[RedactedThinkingBlock, Tag("redacted_thinking")], Annotated[ToolUseBlock, Tag("tool_use")],
        Annotated[ToolResultBlock, Tag("tool_result")], Annotated[ImageBlock, Tag("image")],
        Annotated[DocumentBlock, Tag("document")], Annotated[OtherBlock, Tag("other")],
    ],
    Discriminator(_block_tag),
]
BLOCKS = TypeAdapter(list[ContentBlock], config=ConfigDict(defer_build=True))
_MODELS: dict[str, type[_Block]] = {
    "text": TextBlock, "thinking": ThinkingBlock, "redacted_thinking": RedactedThinkingBlock,
    "tool_use": ToolUseBlock, "tool_result": ToolResultBlock, "image": ImageBlock, "document": DocumentBlock,
}
#: The known block types' models by `type` (the history projection reads their field orders).
BLOCK_MODELS: Mapping[str, type[BaseModel]] = MappingProxyType(_MODELS)


def lenient_blocks(items: Any) -> Any:
    """Each block validated on its own; one that does not fit our model of its type (a field the
    API changed) is kept verbatim as an OtherBlock instead of failing the whole response or record."""
    if not isinstance(items, list):
        return items
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            model = _MODELS.get(item.get("type"), OtherBlock)  # type: ignore[arg-type]
            try:
                item = model.model_validate(item)
            except ValidationError:
                item = OtherBlock.model_validate({"type": "unknown", **item})
        out.append(item)
    return out


#: The known block types, picked by their `type` field inside pydantic-core.
_KnownBlock = Annotated[Union[tuple(_MODELS.values())], Field(discriminator="type")]  # type: ignore[valid-type]
if TYPE_CHECKING:
    BlockList = list[ContentBlock]
else:
    #: A message's or response's blocks: first as a list of known blocks, validated by pydantic-core
    #: alone (no Python call per message or block: most of a long `history --at` read was that); only
    #: a list that does not fit (a type we do not model, a block that does not fit its model, blocks
    #: made already) goes through `lenient_blocks`, block by block.
    BlockList = Annotated[
        Union[list[_KnownBlock], Annotated[list[ContentBlock], BeforeValidator(lenient_blocks)]],
        Field(union_mode="left_to_right"),
    ]

StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "error", "aborted"
]


TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class Usage(BaseModel):
    """Usage as the API reported it: the four token counts, and every other field it sent.

    `cache_creation` splits cache writes by lifetime (`ephemeral_5m_input_tokens`,
    `ephemeral_1h_input_tokens`, priced differently), `server_tool_use` counts server-side tool
    requests (`web_search_requests`, billed per request), `service_tier` and `inference_geo`
    select price variants. Unknown fields are kept too. Absent fields are not dumped, so a
    recorded usage holds exactly what was reported.
    """

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation: dict[str, Any] | None = None
    server_tool_use: dict[str, Any] | None = None
    service_tier: str | None = None
    inference_geo: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    @property
    def tokens(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in TOKEN_FIELDS}

    @property
    def used(self) -> bool:
        """Did the call cost anything: tokens or a server-side tool request."""
        return any(self.tokens.values()) or any(_counts(self.server_tool_use).values())

    def __add__(self, other: "Usage") -> "Usage":
        summed: dict[str, Any] = {k: getattr(self, k) + getattr(other, k) for k in TOKEN_FIELDS}
        for key in ("cache_creation", "server_tool_use"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine is not None or theirs is not None:
                merged = _counts(mine)
                for name, value in _counts(theirs).items():
                    merged[name] = merged.get(name, 0) + value
                summed[key] = merged
        return Usage(**summed)


def _counts(values: dict[str, Any] | None) -> dict[str, int]:
    """The integer entries of a nested usage object (the API may add non-count fields)."""
    return {k: v for k, v in (values or {}).items() if isinstance(v, int) and not isinstance(v, bool)}


class ProviderError(BaseModel):
    """A failed model call as data: what happened and whether retrying could help."""

    model_config = ConfigDict(frozen=True, defer_build=True)
    kind: str
    message: str
    status: int | None = None
    retryable: bool = False
    retry_after_s: float | None = None


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)
    content: BlockList = Field(default_factory=list)
    stop_reason: StopReason = "end_turn"
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    error: ProviderError | None = None
    #: The provider's message id and the stop sequence that ended it, when there was one.
    id: str = ""
    stop_sequence: str | None = None
    #: Why the model stopped, in detail, as the API sent it (a refusal's category and explanation).
    stop_details: dict[str, Any] | None = None
    #: The provider's own message when its shape is not ours (chat-completions), kept as it came; for
    #: the Messages API, `{"stop_reason": …}` when the API's stop reason is not one of ours.
    #: Left out of the dump when absent, so responses recorded before it existed look the same.
    raw: dict[str, Any] | None = None
    #: The provider's id of the HTTP request (Anthropic's `request-id`, OpenAI's `x-request-id` header),
    #: what its support asks for. Left out when absent, like `raw`.
    request_id: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_raw(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for optional in ("raw", "request_id"):
            if isinstance(data, dict) and data.get(optional) is None:
                data.pop(optional, None)
        return cast("dict[str, Any]", data)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def finished(self) -> bool:
        return self.stop_reason in FINISHED_STOP_REASONS

    @property
    def provider_stop_reason(self) -> str:
        """The stop reason as the provider sent it: `stop_reason` holds ours (the loop decides by it),
        and a value outside our vocabulary (`model_context_window_exceeded`, one newer than this code)
        is kept as it came under `raw`."""
        said = (self.raw or {}).get("stop_reason")
        return said if isinstance(said, str) and said else self.stop_reason

    @property
    def cut_tool_uses(self) -> list[ToolUseBlock | OtherBlock]:
        """Every block whose input was cut mid-JSON: our tool_use calls and the API's server_tool_use /
        mcp_tool_use alike (`cut_block_ref` names them)."""
        return [b for b in self.content if isinstance(b, (ToolUseBlock, OtherBlock)) and PARTIAL_INPUT_KEY in (b.model_extra or {})]


def cut_block_ref(block: ToolUseBlock | OtherBlock) -> tuple[str, str]:
    """(id, name) of a tool-use-like block, of our model or not."""
    if isinstance(block, ToolUseBlock):
        return block.id, block.name
    extra = block.model_extra or {}
    return str(extra.get("id", "")), str(extra.get("name", block.type))


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)
    role: Literal["user", "assistant"]
    content: BlockList

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def sendable(blocks: list[Any]) -> list[Any]:
    """The blocks the API accepts back: it rejects text blocks that are empty or only whitespace
    (a refusal may come with one), so those are left out of every request; the record keeps them."""
    return [b for b in blocks if not (isinstance(b, TextBlock) and not b.text.strip())]


def dump_blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    return [b.model_dump(mode="json") for b in blocks]


def load_blocks(data: list[dict[str, Any]]) -> list[Any]:
    return BLOCKS.validate_python(lenient_blocks(data))
