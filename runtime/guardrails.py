"""Guardrails: user-supplied checks on the inbound message, each tool result and the final answer.

Declared in chronicle.toml (or handed to `guardrail_hook` in Python):

    [guardrails.no_secrets]
    check = "checks:no_secrets"          # module:function, the workspace importable
    on = ["tool_result", "final"]        # any of inbound, tool_result, final (default: all three)
    fail = "closed"                      # if the check itself raises: closed = reject, open = let it pass

A check is `check(text, where) -> None | str` (sync or async). None passes; a string replaces
a tool result (inbound and final checks pass or reject: the input and the model's answer are
recorded facts); raising `Rejected(message)` rejects. What a rejection does is a recorded
event each time: an inbound message stops the turn before the model is asked (`guard_stop`,
exit 4), a tool result becomes the tool's failure with the check's message (the model reads
it), a final answer fails the turn with the check's message. A replaced tool result is what
is recorded and what the model reads, with `{"guardrail": NAME, "action": "modified"}` among
the call's effects; a check that errors under `fail = "open"` leaves an `error` effect there.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .hooks import Hook, Stop
from .settings import CONFIG_FILE, SettingsError, load_config
from .tools.base import ToolError, ToolOutput
from .tools.imports import make_importable

if TYPE_CHECKING:
    from chronicle.domain.content import ModelResponse
    from chronicle.domain.session import Session
    from chronicle.domain.tool_call import ToolCall
    from chronicle.domain.turn import Turn

    from .providers.base import ModelRequest

PLACES = ("inbound", "tool_result", "final")


class Rejected(Exception):
    """Raised by a check to reject what it was shown; the message says why."""


class GuardrailError(SettingsError):
    """A [guardrails.NAME] table cannot be used; the message names the key."""


@dataclass(frozen=True)
class Guardrail:
    name: str
    check: Callable[[str, str], Any]
    on: frozenset[str] = frozenset(PLACES)
    fail_closed: bool = True

    async def run(self, text: str, where: str) -> tuple[str | None, str | None, str | None]:
        """(replacement, rejection, error): at most one is set."""
        try:
            result = self.check(text, where)
            if inspect.isawaitable(result):
                result = await result
        except Rejected as exc:
            return None, str(exc) or "rejected", None
        except Exception as exc:  # noqa: BLE001 - a broken check is handled by its fail mode, not by crashing the turn
            error = f"the check raised {type(exc).__name__}: {exc}"
            return (None, error, None) if self.fail_closed else (None, None, error)
        if result is not None and not isinstance(result, str):
            error = f"the check returned {type(result).__name__}; return None, a str, or raise Rejected"
            return (None, error, None) if self.fail_closed else (None, None, error)
        return result, None, None


class GuardrailHook(Hook):
    """The checks at their three places, in declaration order."""

    def __init__(self, guardrails: list[Guardrail]) -> None:
        self.guardrails = list(guardrails)

    def at(self, where: str) -> list[Guardrail]:
        return [g for g in self.guardrails if where in g.on]

    async def before_model_call(self, session: Session, turn: Turn, request: ModelRequest) -> Stop | None:
        if turn.model_calls or turn.steps:
            return None  # only before the turn's first model call: that is when the input arrives
        for guardrail in self.at("inbound"):
            _, rejected, _ = await guardrail.run(turn.input_text, "inbound")
            if rejected is not None:
                return Stop(f"guardrail:{guardrail.name}", f"guardrail {guardrail.name} rejected the input: {rejected}")
        return None

    async def tool_output(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        for guardrail in self.at("tool_result"):
            replacement, rejected, error = await guardrail.run(output.content, "tool_result")
            if rejected is not None:
                raise ToolError(f"guardrail {guardrail.name} rejected the result of {call.name}: {rejected}")
            if error is not None:
                output = replace(output, effects=[*output.effects, {"guardrail": guardrail.name, "error": error, "fail": "open"}])
            elif replacement is not None and replacement != output.content:
                output = replace(output, content=replacement,
                                 effects=[*output.effects, {"guardrail": guardrail.name, "action": "modified"}])
        return output

    async def before_finish(self, session: Session, turn: Turn, response: ModelResponse) -> Stop | None:
        text = "".join(getattr(b, "text", "") for b in response.content if getattr(b, "type", "") == "text")
        for guardrail in self.at("final"):
            _, rejected, _ = await guardrail.run(text, "final")
            if rejected is not None:
                return Stop(f"guardrail:{guardrail.name}", f"guardrail {guardrail.name} rejected the final answer: {rejected}")
        return None


def load_check(path: str, where: str, workspace: Path) -> Callable[[str, str], Any]:
    module_name, _, attribute = path.partition(":")
    if not module_name.strip() or not attribute.strip():
        raise GuardrailError(f"{where}: check must be an import path, package.module:function (got {path!r})")
    make_importable(workspace)
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except Exception as exc:  # noqa: BLE001 - whatever the import raises, the user needs its first line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise GuardrailError(f"{where}: cannot load check {path!r}: {first}") from None
    if not callable(target):
        raise GuardrailError(f"{where}: {path!r} is not callable")
    return target  # type: ignore[no-any-return]


def load_guardrails(workspace: Path) -> list[Guardrail]:
    config = load_config(workspace)
    tables = config.get("guardrails") or {}
    source = str(workspace / CONFIG_FILE)
    if not isinstance(tables, dict):
        raise GuardrailError(f"{source}: [guardrails] must hold [guardrails.NAME] tables")
    found = []
    for name, table in tables.items():
        where = f"{source}: guardrails.{name}"
        if not isinstance(table, dict):
            raise GuardrailError(f"{where} must be a table")
        unknown = sorted(set(table) - {"check", "on", "fail"})
        if unknown:
            raise GuardrailError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: check, fail, on")
        on = table.get("on", list(PLACES))
        if not isinstance(on, list) or not on or any(p not in PLACES for p in on):
            raise GuardrailError(f"{where}: on must list some of {', '.join(PLACES)} (got {on!r})")
        fail = table.get("fail", "closed")
        if fail not in ("closed", "open"):
            raise GuardrailError(f"{where}: fail must be closed or open (got {fail!r})")
        found.append(Guardrail(name, load_check(str(table.get("check", "")), where, workspace), frozenset(on), fail == "closed"))
    return found
