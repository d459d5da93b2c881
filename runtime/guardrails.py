"""Guardrails: user-supplied checks that pass, change or reject the inbound message, each tool
result and the final answer.

Declared in chronicle.toml, or on an `Agent(guardrails=[...])` in Python (recorded on the
session's spec by import path, so a worker or `resume` in another process applies them too):

    [guardrails.no_secrets]
    check = "checks:no_secrets"          # module:function, the workspace importable
    on = ["tool_result", "final"]        # any of inbound, tool_result, final (default: all three)
    fail = "closed"                      # if the check itself raises: closed = reject, open = let it pass

A check is `check(text, where) -> None | str` (sync or async), or `check(text, where, origin)` to also
get who sent the turn's input (`{"channel", "senders", "reply"}` for a channel's input, else None; None at
`tool_result`). None passes; a string replaces
the text; raising `Rejected(message)` rejects. Every change and every open failure is recorded
with the check's name, the place and the SHA-256 and length of the text before and after (never
the text it removed): on the inbound message and the final answer as a `Turn.GuardrailApplied`
event carrying the new text (the input and the response stay recorded verbatim; the model reads
the new input, the turn delivers the new answer and later turns read it); on a tool result as an
entry of the call's `effects` (the original never reaches the store: a replaced result is its text
alone, the original's rich blocks dropped). A rejection is recorded
too: an inbound message stops the turn before the model is asked (`guard_stop`, exit 4), a tool
result becomes the tool's failure with the check's message (the model reads it), a final answer
fails the turn with the check's message.

A sub-agent runs under the checks of the loop that spawned it, then its own recorded ones
(`with_own_checks`); one named like a check it already runs under is left out.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .app.errors import DefinitionError
from .hooks import Checked, Hook, Hooks, Stop
from .import_paths import Ambiguous, Defined, NotLoadable, is_well_formed, load, remembered
from .settings import SettingsError, named_tables
from .tools.base import ToolError, ToolOutput

if TYPE_CHECKING:
    from chronicle.domain.session import Session
    from chronicle.domain.tool_call import ToolCall
    from chronicle.domain.turn import Turn

PLACES = ("inbound", "tool_result", "final")


class Rejected(Exception):
    """Raised by a check to reject what it was shown; the message says why."""


class GuardrailError(SettingsError):
    """A [guardrails.NAME] table cannot be used; the message names the key."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def mark(name: str, where: str, before: str, after: str | None = None, error: str | None = None) -> dict[str, Any]:
    """What is recorded of a check's change (`after`) or open failure (`error`): never the removed text."""
    entry: dict[str, Any] = {"guardrail": name, "where": where, "action": "error" if error is not None else "modified",
                             "before_sha256": digest(before), "before_chars": len(before)}
    if error is not None:
        entry.update(error=error, fail="open")
    else:
        assert after is not None
        entry.update(after_sha256=digest(after), after_chars=len(after))
    return entry


@dataclass(frozen=True)
class Guardrail:
    """A check and where it applies. `check` is a callable or an import path (`module:function`);
    `on` any of inbound, tool_result, final; `fail` "closed" (a check that raises rejects) or "open"."""

    name: str
    check: Callable[[str, str], Any] | str
    on: frozenset[str] | tuple[str, ...] | list[str] = frozenset(PLACES)
    fail_closed: bool = True
    fail: str | None = None

    def __post_init__(self) -> None:
        """DefinitionError (ChronicleError code 2, and the ValueError or TypeError this raised before) naming the field."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise DefinitionError(f"guardrail {self.name!r}: name takes text, like Guardrail(\"redact\", check)")
        if isinstance(self.on, str):  # "final" is a sequence of letters, none of them a place
            raise DefinitionError(f"guardrail {self.name}: on takes a list, like on=[{self.on!r}]")
        try:
            on = frozenset(self.on)
        except TypeError:  # not a collection, or one holding what cannot be a place (a list, a dict)
            raise DefinitionError(f"guardrail {self.name}: on takes a list of places, some of {', '.join(PLACES)} "
                                  f"(got {self.on!r})") from None
        if not on or any(p not in PLACES for p in on):
            got = sorted(on, key=repr)  # by repr: the places given may be of several types, which do not compare
            raise DefinitionError(f"guardrail {self.name}: on must list some of {', '.join(PLACES)} (got {got!r})")
        object.__setattr__(self, "on", on)
        if self.fail is not None:
            if self.fail not in ("closed", "open"):
                raise DefinitionError(f"guardrail {self.name}: fail must be closed or open (got {self.fail!r})")
            object.__setattr__(self, "fail_closed", self.fail == "closed")
        object.__setattr__(self, "fail", "closed" if self.fail_closed else "open")
        if not (callable(self.check) or isinstance(self.check, str)):
            raise DefinitionError(f"guardrail {self.name}: check must be a function or an import path, not {type(self.check).__name__}")

    def record(self) -> dict[str, Any]:
        """How a session's spec records it: name, import path, places, fail mode."""
        return {"name": self.name, "check": check_path(self.check), "on": [p for p in PLACES if p in self.on], "fail": self.fail}

    async def run(self, text: str, where: str, origin: dict[str, Any] | None = None) -> tuple[str | None, str | None, str | None]:
        """(replacement, rejection, error): at most one is set. `origin` (who sent the turn's input, see
        hooks.Checked) goes to a check that takes an `origin` parameter; `check(text, where)` is called as before."""
        check = self.check
        if isinstance(check, str):
            check = load_check(check, f"guardrail {self.name}", None)
        try:
            result = check(text, where, origin=origin) if takes_origin(check) else check(text, where)  # type: ignore[call-arg]
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

    async def _check(self, where: str, checked: Checked) -> Checked:
        for guardrail in self.at(where):
            replacement, rejected, error = await guardrail.run(checked.text, where, checked.origin)
            if rejected is not None:
                what = "the input" if where == "inbound" else "the final answer"
                checked.stop = Stop(f"guardrail:{guardrail.name}", f"guardrail {guardrail.name} rejected {what}: {rejected}")
                return checked
            if error is not None:
                checked.marks.append((mark(guardrail.name, where, checked.text, error=error), None))
            elif replacement is not None and replacement != checked.text:
                checked.marks.append((mark(guardrail.name, where, checked.text, replacement), replacement))
                checked.text = replacement
        return checked

    async def check_inbound(self, session: Session, turn: Turn, checked: Checked) -> Checked:
        return await self._check("inbound", checked)

    async def check_final(self, session: Session, turn: Turn, checked: Checked) -> Checked:
        return await self._check("final", checked)

    async def tool_output(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        for guardrail in self.at("tool_result"):
            replacement, rejected, error = await guardrail.run(output.content, "tool_result")
            if rejected is not None:
                raise ToolError(f"guardrail {guardrail.name} rejected the result of {call.name}: {rejected}")
            if error is not None:
                output = replace(output, effects=[*output.effects, mark(guardrail.name, "tool_result", output.content, error=error)])
            elif replacement is not None and replacement != output.content:
                # The replacement is the whole result: the blocks (an MCP tool's structured content, resources,
                # images) were the original's, which must not reach the store beside it, nor the model after it.
                output = replace(output, content=replacement, blocks=None,
                                 effects=[*output.effects, mark(guardrail.name, "tool_result", output.content, replacement)])
        return output


def takes_origin(check: Callable[..., Any]) -> bool:
    """Whether a check has an `origin` parameter (or **kwargs): checks written before it keep `check(text, where)`."""
    try:
        parameters = inspect.signature(check).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return False
    return any(p.name == "origin" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


#: Checks defined in this process, by the import path a spec records for them.
_DEFINED = Defined("guardrail", "guardrail check")


def check_path(check: Callable[[str, str], Any] | str) -> str:
    """The import path of a check; a function is remembered under it, so this process finds it even
    when no other could import it (a script run directly)."""
    return remembered(_DEFINED, check)


def load_check(path: str, where: str, workspace: Path | None) -> Callable[[str, str], Any]:
    if path not in _DEFINED and not is_well_formed(path):
        raise GuardrailError(f"{where}: check must be an import path, package.module:function (got {path!r})")
    try:
        target = load(path, workspace, _DEFINED)
    except NotLoadable as failed:
        raise GuardrailError(f"{where}: cannot load check {path!r}: {failed.first_line}{failed.hint}") from None
    except Ambiguous as exc:
        raise GuardrailError(f"{where}: check {exc}") from None
    if not callable(target):
        raise GuardrailError(f"{where}: {path!r} is not callable")
    return target  # type: ignore[no-any-return]


def load_guardrails(workspace: Path) -> list[Guardrail]:
    found = []
    for name, table, where in named_tables(workspace, "guardrails", frozenset({"check", "on", "fail"}), GuardrailError):
        on = table.get("on", list(PLACES))
        if not isinstance(on, list) or not on or any(p not in PLACES for p in on):
            raise GuardrailError(f"{where}: on must list some of {', '.join(PLACES)} (got {on!r})")
        fail = table.get("fail", "closed")
        if fail not in ("closed", "open"):
            raise GuardrailError(f"{where}: fail must be closed or open (got {fail!r})")
        found.append(Guardrail(name, load_check(str(table.get("check", "")), where, workspace), frozenset(on), fail == "closed"))
    return found


def recorded_guardrails(records: Any, workspace: Path) -> list[Guardrail]:
    """The guardrails a session's spec recorded (from `Agent(guardrails=...)`), loaded by import path."""
    found = []
    for record in records or ():
        where = f"guardrail {record.get('name')} recorded on the session"
        found.append(Guardrail(str(record["name"]), load_check(str(record["check"]), where, workspace),
                               frozenset(record.get("on") or PLACES), record.get("fail", "closed") == "closed"))
    return found


def guardrails_for(records: Any, workspace: Path) -> list[Guardrail]:
    """The session's recorded guardrails, then the workspace's chronicle.toml ones not named the same."""
    recorded = recorded_guardrails(records, workspace)
    names = {g.name for g in recorded}
    return [*recorded, *(g for g in load_guardrails(workspace) if g.name not in names)]


def under_parent(parent: list[Guardrail], own: list[Guardrail]) -> list[Guardrail]:
    """A sub-agent's checks: the ones its parent runs under first, then its own in declaration order.
    One of its own named like one of its parent's is left out: the parent's runs, so a sub-agent can
    add checks but never replace or loosen one it runs under."""
    names = {g.name for g in parent}
    return [*parent, *(g for g in own if g.name not in names)]


def guardrails_along(lineage: list[Any], workspace: Path) -> list[Guardrail]:
    """The checks a session runs under, given the recorded guardrails of its specs from the top-level
    session down to its own: the top-level session's and chronicle.toml's, then each sub-agent's own."""
    found = guardrails_for(lineage[0], workspace)
    for records in lineage[1:]:
        found = under_parent(found, recorded_guardrails(records, workspace))
    return found


def with_own_checks(hooks: Hooks, records: Any, workspace: Path) -> Hooks:
    """A sub-agent's hooks: its parent's (the same objects, so guards keep counting for the whole tree),
    with the checks it runs under extended by its own recorded ones (`under_parent`)."""
    own = recorded_guardrails(records, workspace)
    if not own:
        return hooks
    above = next((h for h in hooks.hooks if isinstance(h, GuardrailHook)), None)
    checks = GuardrailHook(under_parent(above.guardrails if above is not None else [], own))
    if above is None:
        return Hooks([*hooks.hooks, checks])
    return Hooks([checks if h is above else h for h in hooks.hooks])
