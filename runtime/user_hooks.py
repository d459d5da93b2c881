"""Your hooks: code that sees each model call and each tool call of a turn, and may stop the turn,
ask for approval or skip a tool (runtime/hooks.py is the interface the built-in guards use too).

Declared in chronicle.toml, or on an `Agent(hooks=[...])` in Python (recorded on the session's spec
by import path, as middleware is, so a worker or `resume` in another process runs them too):

    [hooks.count]
    use = "myhooks:CountCalls"   # module:attribute, a chronicle.Hook subclass; the workspace importable
    options = { limit = 5 }       # optional: CountCalls(**options) makes the hook

They run after the built-in guards and guardrails, in declaration order (an Agent's first, then
chronicle.toml's not named the same). What one decides that changes the run is recorded with its
name: a Stop ends the turn `stopped` with guard `hook:NAME` (Turn.Stopped, audit `guard_stop`); a
Skip skips the call with reason `skipped by hook NAME: ...`; a NeedApproval pauses the call for a
person. A hook that raises fails the turn with `error: {"hook": NAME, "kind": "error"}`, as a
middleware that raises does: at once from a before_* method, at its next before_* method of the
same turn from after_model_call, after_tool_call or on_event.

Only the decision and observation methods are forwarded: check_inbound, check_final and tool_output
(which change what the model reads) are guardrails' (runtime/guardrails.py), whose every change is
recorded; a hook that changes the model's context without a record would break replay.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .hooks import Hook, Hooks, NeedApproval, Skip, Stop, ToolVerdict
from .import_paths import Ambiguous, Defined, NotLoadable, is_well_formed, remembered
from .import_paths import load as load_path
from .settings import CONFIG_FILE, SettingsError, use_tables

log = logging.getLogger(__name__)


class HookError(SettingsError):
    """A hook entry cannot be used (bad table, path that does not load, not a Hook); the message names it."""


def hook_record(item: Any, agent: str = "") -> dict[str, Any]:
    """A hooks= item as a spec records it: name, import path of its class, options. A dataclass instance
    is recorded with its fields as options; any other instance must be made by its class with no arguments.
    The name is the class's `name` attribute if it has one, else the class name in lower case."""
    where = f"agent {agent}: " if agent else ""
    cls = item if inspect.isclass(item) else type(item)
    if not (inspect.isclass(cls) and issubclass(cls, Hook)):
        raise TypeError(f"{where}hooks= takes chronicle.Hook subclasses or their instances, not {cls.__name__}")
    options: dict[str, Any] = {}
    if not inspect.isclass(item) and dataclasses.is_dataclass(item):
        options = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    name = getattr(cls, "name", None)
    record = {"name": name if isinstance(name, str) and name else cls.__name__.lower(), "use": use_path(cls), "options": options}
    if not inspect.isclass(item):
        _LIVE.add(_key(record), item)
    return record


#: Hook classes defined in this process, by the import path a spec records for them.
_DEFINED = Defined("hook", "hook class")


#: Hook instances given to an Agent in this process: this process runs the very object (its counts are
#: yours to read); another process makes one from the recorded class and options. Keyed by name, class and options:
#: two instances alike (`Counter()` given to two Agents) are told apart by the Agent running (import_paths.using).
_LIVE = Defined("hook_instance", "hook instance")


def _key(record: dict[str, Any]) -> str:
    return repr((str(record.get("name")), str(record.get("use")), repr(sorted(dict(record.get("options") or {}).items()))))


def use_path(target: Any) -> str:
    return remembered(_DEFINED, target)


def load(record: dict[str, Any], where: str, workspace: Path | None) -> NamedHook:
    """The hook a record names, made with its options; a HookError says what is wrong."""
    path, options = str(record.get("use") or ""), dict(record.get("options") or {})
    try:
        live = _LIVE.get(_key(record))
    except Ambiguous as exc:
        raise HookError(f"{where}: {exc.count} different instances of hook {record['name']} ({path}, with the same options) "
                        f"were given to Agents in this process, and a session records only its class and options: "
                        f"{exc.advice}") from None
    if live is not None:
        return NamedHook(str(record["name"]), live)
    if path not in _DEFINED and not is_well_formed(path):
        raise HookError(f"{where}: use must be an import path, package.module:attribute (got {path!r})")
    try:
        target = load_path(path, workspace, _DEFINED)
    except NotLoadable as failed:
        raise HookError(f"{where}: cannot load hook {path!r}: {failed.first_line}{failed.hint}") from None
    except Ambiguous as exc:
        raise HookError(f"{where}: hook {exc}") from None
    if inspect.isclass(target):
        try:
            target = target(**options)
        except Exception as exc:  # noqa: BLE001 - bad options are the user's to fix
            raise HookError(f"{where}: {path}(**{options!r}) failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(target, Hook):
        raise HookError(f"{where}: {path!r} is not a chronicle.Hook subclass")
    return NamedHook(str(record["name"]), target)


def configured(workspace: Path) -> list[dict[str, Any]]:
    """chronicle.toml's [hooks.NAME] tables as records, in declaration order."""
    return use_tables(workspace, "hooks", HookError)


def recorded_hooks(records: Any, workspace: Path) -> list[NamedHook]:
    """The hooks a session's spec recorded (from `Agent(hooks=...)`), each loaded."""
    return [load(dict(r), f"hook {r['name']} recorded on the session", workspace) for r in records or ()]


def hooks_for(records: Any, workspace: Path) -> list[NamedHook]:
    """The session's recorded hooks, then chronicle.toml's not named the same, each loaded."""
    loaded = recorded_hooks(records, workspace)
    names = {h.name for h in loaded}
    for record in configured(workspace):
        if record["name"] not in names:
            loaded.append(load(record, f"{workspace / CONFIG_FILE}: hooks.{record['name']}", workspace))
    return loaded


def hooks_along(lineage: list[Any], workspace: Path) -> list[NamedHook]:
    """The hooks a session runs, given the recorded hooks of its specs from the top-level session down:
    the top-level session's and chronicle.toml's, then each sub-agent's own not named like one above."""
    found = hooks_for(lineage[0], workspace)
    for records in lineage[1:]:
        names = {h.name for h in found}
        found += [h for h in recorded_hooks(records, workspace) if h.name not in names]
    return found


def with_own_hooks(hooks: Hooks, records: Any, workspace: Path) -> Hooks:
    """A sub-agent's hooks: its parent's (the same objects, so a hook counting calls counts the whole tree),
    then its own recorded ones not named like one it already runs."""
    own = recorded_hooks(records, workspace)
    names = {h.name for h in hooks.hooks if isinstance(h, NamedHook)}
    own = [h for h in own if h.name not in names]
    return Hooks([*hooks.hooks, *own]) if own else hooks


@dataclass
class _Failure:
    turn_id: str
    message: str


class NamedHook(Hook):
    """A user's hook under its name: its verdicts name it, and what it raises fails the turn, recorded."""

    def __init__(self, name: str, hook: Hook) -> None:
        self.name, self.hook = name, hook
        self._failed: _Failure | None = None  # raised by an observing method, told at the next decision

    def _failure(self, message: str) -> Stop:
        return Stop(f"hook:{self.name}", f"hook {self.name}: {message}", error={"hook": self.name, "kind": "error"})

    def _raised(self, exc: Exception) -> str:
        return f"raised {type(exc).__name__}: {exc}"

    def _pending(self, turn: Any) -> Stop | None:
        failed, self._failed = self._failed, None
        if failed is not None and failed.turn_id == str(turn.id):
            return self._failure(failed.message)
        if failed is not None:  # raised after its turn had ended (on_event of its end): nothing left to fail
            log.warning("hook %s: %s (turn %s had ended)", self.name, failed.message, failed.turn_id)
        return None

    def _remember(self, turn_id: Any, method: str, exc: Exception) -> None:
        message = f"{method} {self._raised(exc)}"
        if turn_id is None:  # an event outside any turn: nothing to fail, so say so in the log
            log.warning("hook %s: %s", self.name, message)
        elif self._failed is None or self._failed.turn_id != str(turn_id):
            self._failed = _Failure(str(turn_id), message)

    def _stop(self, verdict: Any, method: str) -> Stop | None:
        if verdict is None:
            return None
        if not isinstance(verdict, Stop):
            return self._failure(f"{method} returned {type(verdict).__name__}; return None or Stop")
        return replace(verdict, guard=f"hook:{self.name}", reason=f"hook {self.name}: {verdict.reason}")

    async def before_model_call(self, session: Any, turn: Any, request: Any) -> Stop | None:
        pending = self._pending(turn)
        if pending is not None:
            return pending
        try:
            return self._stop(await self.hook.before_model_call(session, turn, request), "before_model_call")
        except Exception as exc:  # noqa: BLE001 - a broken hook fails the turn, recorded, not the process
            return self._failure(f"before_model_call {self._raised(exc)}")

    async def after_model_call(self, session: Any, turn: Any, response: Any) -> None:
        try:
            await self.hook.after_model_call(session, turn, response)
        except Exception as exc:  # noqa: BLE001 - told at the next decision of this turn
            self._remember(turn.id, "after_model_call", exc)

    async def before_tool_call(self, session: Any, turn: Any, call: Any) -> ToolVerdict:
        pending = self._pending(turn)
        if pending is not None:
            return pending
        try:
            verdict = await self.hook.before_tool_call(session, turn, call)
        except Exception as exc:  # noqa: BLE001
            return self._failure(f"before_tool_call {self._raised(exc)}")
        if isinstance(verdict, Skip):
            return Skip(f"skipped by hook {self.name}: {verdict.reason}")
        if isinstance(verdict, NeedApproval):
            return NeedApproval(f"hook {self.name}: {verdict.reason}")
        if verdict is not None and not isinstance(verdict, Stop):
            return self._failure(f"before_tool_call returned {type(verdict).__name__}; return None, Stop, Skip or NeedApproval")
        return self._stop(verdict, "before_tool_call")

    async def after_tool_call(self, session: Any, turn: Any, call: Any) -> None:
        try:
            await self.hook.after_tool_call(session, turn, call)
        except Exception as exc:  # noqa: BLE001
            self._remember(turn.id, "after_tool_call", exc)

    async def on_event(self, event: Any) -> None:
        try:
            await self.hook.on_event(event)
        except Exception as exc:  # noqa: BLE001
            self._remember(getattr(event, "turn_id", None), f"on_event({type(event).__name__})", exc)

    async def before_finish(self, session: Any, turn: Any, response: Any) -> Stop | None:
        pending = self._pending(turn)
        if pending is not None:
            return pending
        try:
            verdict = self._stop(await self.hook.before_finish(session, turn, response), "before_finish")
        except Exception as exc:  # noqa: BLE001
            return self._failure(f"before_finish {self._raised(exc)}")
        if verdict is not None and verdict.error is None:  # a rejected final answer fails the turn
            verdict = replace(verdict, error={"hook": self.name, "kind": "rejected"})
        return verdict
