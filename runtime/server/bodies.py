"""The request bodies the HTTP API takes: strict pydantic models, so a bad field is a 4xx naming it.

Strict, not coerced: `{"always": "yes"}` once became a standing always-allow, and `"2"` a number
of turns. Unknown fields are refused too, except on a webhook, whose sender's JSON is not ours.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from chronicle.runtime.bounds import LARGEST


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewSession(_Body):
    prompt: str = Field(min_length=1)
    provider: str | None = None
    model: str | None = None
    workspace: str | None = None
    agent: str | None = None


class NewInput(_Body):
    prompt: str = Field(min_length=1)


class ApproveBody(_Body):
    tool_call: str | None = None
    always: bool = False


class DenyBody(_Body):
    tool_call: str | None = None
    reason: str | None = None


class SteerBody(_Body):
    message: str = Field(min_length=1)
    wait_batch: bool = False
    turn_id: str | None = None  # steer only this turn: 409 if it has ended, instead of queuing the next input


class CancelBody(_Body):
    wait: float = Field(default=10.0, ge=0, le=300)


class UndoBody(_Body):
    turns: int = Field(default=1, ge=1, le=LARGEST)
    files: bool = False
    workspace: str | None = None


class RedoBody(_Body):
    files: bool = False


class ForkBody(_Body):
    at: int | None = Field(default=None, ge=1, le=LARGEST)


class ModelBody(_Body):
    """`POST /sessions/{id}/model`: the model its next turns use; `thinking_tokens` 0 is off, absent keeps the recorded one."""

    model: str = Field(min_length=1)
    thinking_tokens: int | None = Field(default=None, ge=0, le=LARGEST)


class CompactBody(_Body):
    keep: int | None = Field(default=None, ge=0, le=LARGEST)
    strategy: str = Field(default="summary", pattern="^(summary|truncate)$")


class WebhookBody(BaseModel):
    """A webhook's JSON: the message in `text` (or `prompt` / `message`), who sent it in `sender` (or `from`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True)
    text: str | None = None
    prompt: str | None = None
    message: str | None = None
    sender: str | None = Field(default=None, alias="from")

    def content(self) -> str:
        return (self.text or self.prompt or self.message or "").strip()
