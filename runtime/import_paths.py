"""User code named by import path (`package.module:attribute`): tools, guardrail checks, middleware.

A session records the user's code by import path so that any process (a worker, `resume`, the
server) can load it again. The process that defined the code (a program using the Python API, or
a script run directly, whose `__main__` no other process can import) registers it under that path,
and is served from the registry. One loader, so the three kinds find, import and report alike.
"""

from __future__ import annotations

import importlib
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any


class NotLoadable(Exception):
    """An import path that names nothing: `cause` is what the import or attribute lookup raised."""

    def __init__(self, path: str, cause: BaseException, missing_attribute: bool) -> None:
        super().__init__(path)
        self.path, self.cause, self.missing_attribute = path, cause, missing_attribute

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def first_line(self) -> str:
        """The cause's first line: what the user needs to see, without a traceback."""
        return (str(self.cause).strip().splitlines() or [type(self.cause).__name__])[0]

    @property
    def hint(self) -> str:
        if self.module != "__main__":
            return ""
        return ("; code defined in a script run directly loads only in that process: move it into a module, or continue "
                "the session from a program that defines it (Chronicle.resume)")


def path_of(target: Any) -> str:
    """The import path another process would use for a function or class (or an instance's class)."""
    return f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', type(target).__qualname__)}"


class Ambiguous(ValueError):
    """An import path under which this process holds two different live objects, and no Agent says which it means."""

    advice = ("run it with its Agent (run(agent, session=...)), or keep the Agent it was run with alive while resuming "
              "it in this process; code another process runs needs an import path of its own")

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message)
        self.count = count


class Clash(ValueError):
    """One Agent (with its sub-agents) given two different objects under one import path."""


class LiveObjects:
    """The objects one Agent and its sub-agents were given, by kind ("tool", "guardrail", …) and import path.

    A session records the user's code by import path, and one path may hold several objects in one process:
    each call of a factory (`def tools_for(tenant): @tool def refund…`) makes a closure with the same path,
    `mod:tools_for.<locals>.refund`. A run made with an Agent uses that Agent's own objects (`using`), so the
    very object the program gave runs, whatever else was defined under its path since."""

    def __init__(self, gone: bool = False) -> None:
        self.by_kind: dict[str, dict[str, Any]] = {}
        #: Stands for an Agent a session was run with in this process that is no longer alive: its objects are
        #: gone, so a path defined more than once here cannot be trusted to hold them (Defined.__getitem__).
        self.gone = gone

    def add(self, kind: str, path: str, target: Any) -> None:
        held = self.by_kind.setdefault(kind, {})
        known = held.get(path, _MISSING)
        if known is not _MISSING and not _same(kind, known, target):
            raise Clash(f"two different {_NOUNS.get(kind, kind)}s have the import path {path!r} (made by one factory, or "
                        "defined twice); a session records code by that path only, so it could not tell them apart: "
                        "give this agent and its sub-agents one of them, or define each where it has a path of its own")
        held[path] = target

    def merge(self, other: LiveObjects) -> None:
        for kind, held in other.by_kind.items():
            for path, target in held.items():
                self.add(kind, path, target)

    def get(self, kind: str, path: str) -> Any:
        return self.by_kind.get(kind, {}).get(path, _MISSING)


_MISSING = object()
#: What makes two objects under one path the same: a kind's identity (a @tool's function, a Tool class).
_IDENTITIES: dict[str, Callable[[Any], Any]] = {}
_NOUNS: dict[str, str] = {}
#: The Agent objects the running task uses (set by the library around a run, a resume, a worker's turn).
_SCOPE: ContextVar[LiveObjects | None] = ContextVar("chronicle_live_objects", default=None)
#: Collecting what an Agent being defined is given (Agent.__post_init__), whatever function records it.
_COLLECTING: ContextVar[LiveObjects | None] = ContextVar("chronicle_collecting", default=None)
#: Which Agent's objects each session run with an Agent in this process uses, as long as that Agent lives:
#: `resume(sid)`, an approval's resume and an in-process worker run the objects its run was given. A dead
#: reference is kept (a few bytes a session): it says the session's own objects are gone.
_SESSIONS: dict[str, weakref.ref[LiveObjects]] = {}


def _identity(kind: str, target: Any) -> Any:
    return _IDENTITIES.get(kind, lambda o: o)(target)


def _same(kind: str, a: Any, b: Any) -> bool:
    """One object under two mentions: the same identity (a function, a class), or equal settings (an MCP server
    defined in code twice alike, which is a value and not code)."""
    left, right = _identity(kind, a), _identity(kind, b)
    return left is right or (kind in _BY_VALUE and left == right)


#: Kinds whose objects are settings compared by value (`add_by_value`), not code compared by identity.
_BY_VALUE: set[str] = set()


def add_by_value(kind: str, name: str, target: Any) -> None:
    """`target` (settings, such as an McpServer) given to the Agent being defined, under `name`: a run of that Agent
    uses it (`scoped`), whatever else this process defined under the name since; two different ones in one Agent
    tree are a Clash."""
    _BY_VALUE.add(kind)
    found = _COLLECTING.get()
    if found is not None:
        found.add(kind, name, target)


def scoped(kind: str, name: str) -> Any:
    """What the running Agent was given under `name` (`add_by_value`, `using`); None outside such a run."""
    scope = _SCOPE.get()
    found = scope.get(kind, name) if scope is not None else _MISSING
    return None if found is _MISSING else found


@contextmanager
def collecting() -> Iterator[LiveObjects]:
    """What is remembered inside the block, gathered (an Agent's tools, checks, middleware and hooks)."""
    found = LiveObjects()
    token = _COLLECTING.set(found)
    try:
        yield found
    finally:
        _COLLECTING.reset(token)


@contextmanager
def using(objects: LiveObjects | None) -> Iterator[None]:
    """Within the block (and the tasks it starts), paths load as `objects` hold them first."""
    if objects is None:
        yield
        return
    token = _SCOPE.set(objects)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def bind(session_id: Any, objects: LiveObjects) -> None:
    """Session `session_id` was run (or submitted) with the Agent whose objects these are."""
    _SESSIONS[str(session_id)] = weakref.ref(objects)


def has_bound() -> bool:
    """Whether any session was run with an Agent in this process (a CLI's worker or resume never has one)."""
    return len(_SESSIONS) > 0


def bound(session_ids: list[Any]) -> LiveObjects | None:
    """The objects of the first of these sessions (a session, then its parents) run with an Agent in this process;
    a `gone` LiveObjects when that Agent is no longer alive; None when no Agent ran them here."""
    for sid in session_ids:
        ref = _SESSIONS.get(str(sid))
        if ref is not None:
            return ref() or LiveObjects(gone=True)
    return None


class Defined:
    """What this process defined under each import path, of one kind (tools, checks, middleware, hooks).

    The last one defined under a path is what the path loads, unless the running Agent holds another
    (`using`). Two different objects still alive under one path are ambiguous without an Agent: the path
    alone cannot say which a session means, so loading it is refused (`Ambiguous`) rather than aliased."""

    def __init__(self, kind: str, noun: str, identity: Callable[[Any], Any] | None = None) -> None:
        self.kind, self.noun = kind, noun
        _IDENTITIES[kind] = identity or (lambda o: o)
        _NOUNS[kind] = noun
        self._latest: dict[str, Any] = {}
        self._each: dict[str, list[Callable[[], Any]]] = {}
        #: How many different objects were defined under each path in this process's life.
        self._defined: dict[str, int] = {}

    def add(self, path: str, target: Any) -> None:
        key = _identity(self.kind, target)
        refs = [r for r in self._each.get(path, []) if r() is not None]
        if not any(r() is key for r in refs):
            refs.append(_ref(key))
            self._defined[path] = self._defined.get(path, 0) + 1
        self._each[path] = refs
        self._latest[path] = target
        collecting_ = _COLLECTING.get()
        if collecting_ is not None:
            collecting_.add(self.kind, path, target)

    def __contains__(self, path: object) -> bool:
        scope = _SCOPE.get()
        return (scope is not None and scope.get(self.kind, str(path)) is not _MISSING) or path in self._latest

    def __getitem__(self, path: str) -> Any:
        scope = _SCOPE.get()
        if scope is not None and (found := scope.get(self.kind, path)) is not _MISSING:
            return found
        if scope is not None and scope.gone and self._defined.get(path, 0) > 1:
            raise Ambiguous(f"{path!r}: the Agent this session was run with in this process is gone, and other {self.noun}s "
                            f"were defined under that path since, so which one it means cannot be told: {Ambiguous.advice}",
                            self._defined[path])
        alive = [r for r in self._each.get(path, ()) if r() is not None]
        if len(alive) > 1:
            raise Ambiguous(f"{path!r} names {len(alive)} different {self.noun}s defined in this process (each call of a "
                            f"factory makes its own), and a session records only the path: {Ambiguous.advice}", len(alive))
        return self._latest[path]

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default


def _ref(target: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(target)
    except TypeError:  # no weak reference to it (a builtin, a slotted instance): held for the process's life
        return lambda: target


def remembered(defined: Defined, target: Any) -> str:
    """`target`'s import path (a path given as text is kept), with `target` remembered under it in
    `defined`, so this process loads it even where no other process could (a script run directly)."""
    if isinstance(target, str):
        return target
    path = path_of(target)
    defined.add(path, target)
    return path


def only_this_process(path: str) -> bool:
    """A path no other process can import: code of a script run directly, or defined inside a function."""
    return path.startswith("__main__:") or "<locals>" in path


def is_well_formed(path: str) -> bool:
    module_name, _, attribute = path.partition(":")
    return bool(module_name.strip() and attribute.strip())


def make_importable(workspace: Path | None) -> None:
    """The workspace's modules can be named in import paths; appended, so a workspace file never shadows
    an installed module (a `json.py` in the workspace must not replace the standard library's)."""
    if workspace is not None:
        where = str(Path(workspace).resolve())
        if where not in sys.path:
            sys.path.append(where)


def load(path: str, workspace: Path | None, defined: Defined) -> Any:
    """What a well-formed `path` names: from `defined` if this process registered it (importing the
    module may register it, as `@tool` does), else imported. Raises NotLoadable, or Ambiguous for a path
    this process holds two live objects under with no Agent to say which (`Defined`)."""
    if path in defined:
        return defined[path]
    module_name, _, attribute = path.partition(":")
    make_importable(workspace)
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module raises (sys.exit too), the user needs its first line
        raise NotLoadable(path, exc, missing_attribute=False) from None
    if path in defined:
        return defined[path]
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise NotLoadable(path, exc, missing_attribute=True) from None
    return target
