"""Typed tools: a pydantic input model (its JSON schema is what the model sees) and flags.

Flags say what the runtime may do: `read_only` tools are safe in sub-agents and re-run by
replay; `idempotent` ones may run again after a crash; `parallel_safe` ones run concurrently;
`requires_approval` ones wait for a person (or --yes); `may_end_turn` ones (task_complete) can
finish the turn with their result; `unbounded` ones (delegate) run as long as the work they
drive, which has its own limits, instead of the per-tool timeout.
"""

from __future__ import annotations

import asyncio
import copy
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

#: JSON schema of each tool input model, without its title (`Tool.schema`); models made at run time (MCP) are let go.
_INPUT_SCHEMAS: "weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]]" = weakref.WeakKeyDictionary()

MAX_OUTPUT_CHARS = 30_000


class ToolError(Exception):
    """A tool refusing its input; the message becomes an error result the model reads."""


@dataclass
class ToolOutput:
    content: str
    is_error: bool = False
    effects: list[dict[str, Any]] = field(default_factory=list)
    #: This result finishes the turn: the loop makes no further model call (task_complete).
    ends_turn: bool = False
    #: The result as content blocks when it is more than text (an MCP tool's images, structured
    #: content): recorded on the tool call in full; the model reads `content`.
    blocks: list[dict[str, Any]] | None = None


#: A progress line is for a glance: longer ones are cut.
UPDATE_CHARS = 500
#: Progress events on their way to subscribers.
_UPDATES: set[asyncio.Task[Any]] = set()


@dataclass
class ToolContext:
    workspace: Path
    timeout_s: float = 180.0
    session_id: str = ""
    tool_call_id: str = ""
    #: The running loop's I/O bundle (runtime/loop_io.py), for tools that act on the runtime itself
    #: (delegate, list_agents): its store, clock and a way to spawn sub-agents — never the loop.
    io: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: The event store's URL: its files are out of every tool's reach (see sandbox.py).
    store_url: str | None = None
    #: Set on the context of a spawn_batch subtask: its place among the subtasks its calling call has run
    #: (runtime/subtasks.py). A subtask shares its caller's tool_call_id; this is how replay tells them apart.
    subtask: int | None = None
    #: The event loop the call runs on, so `update` can be called from a sync tool's thread too.
    event_loop: Any = None

    def update(self, detail: str, status: str = "running") -> None:
        """Tell live subscribers how the call is getting on (a `tool_update` event: `run`'s terminal and
        `--json`, the library's stream). Progress is live only, never recorded: the result is the record.
        Safe from the loop's thread and from a sync tool's; does nothing outside a running session."""
        if self.io is None or self.event_loop is None or self.event_loop.is_closed():
            return
        from chronicle.runtime.live import ToolUpdate

        event = ToolUpdate(session_id=self.session_id, tool_call_id=self.tool_call_id, status=status, detail=detail[:UPDATE_CHARS])
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self.event_loop:
            task = here.create_task(self.io.emit(event))
            _UPDATES.add(task)  # held until sent: the loop keeps only weak references to its tasks
            task.add_done_callback(_UPDATES.discard)
        else:  # a function its turn gave up on runs on after that turn's loop has closed: nobody listens then
            sending = self.io.emit(event)
            try:
                asyncio.run_coroutine_threadsafe(sending, self.event_loop)
            except RuntimeError:
                sending.close()

    @cached_property
    def sandbox(self) -> Any:
        """The workspace confinement every file tool and walk applies (a sandbox.Sandbox)."""
        from .sandbox import Sandbox

        return Sandbox.of(self.workspace, self.store_url)


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    read_only: ClassVar[bool] = False
    requires_approval: ClassVar[bool] = False
    idempotent: ClassVar[bool] = False
    parallel_safe: ClassVar[bool] = False
    may_end_turn: ClassVar[bool] = False
    unbounded: ClassVar[bool] = False
    #: Seconds this tool may run, instead of the loop's per-tool timeout (None: that default).
    timeout_s: ClassVar[float | None] = None
    #: The first tool edition that has this tool (runtime/tools/editions.py); sessions of older editions never get it.
    since_edition: ClassVar[int] = 1
    #: Its result reads what the event store holds beyond the session (the task board, which other sessions and
    #: commands change): replay, whose throwaway store holds the replayed session alone, answers it from the
    #: recording instead of running it again.
    reads_store: ClassVar[bool] = False

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError

    @classmethod
    def flags(cls) -> dict[str, bool]:
        return {
            "read_only": cls.read_only,
            "requires_approval": cls.requires_approval,
            "idempotent": cls.idempotent,
            "parallel_safe": cls.parallel_safe,
        }

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """pydantic builds the JSON schema anew at every call (≈ 0.5 ms a tool), and each loop has a
        toolbox of its own (one per turn in the bench, or in a server), so the schema is kept per
        input model and handed out as a copy that a caller (or subclass) may change."""
        schema = _INPUT_SCHEMAS.get(cls.Input)
        if schema is None:
            schema = _INPUT_SCHEMAS[cls.Input] = cls.Input.model_json_schema()
            schema.pop("title", None)
        return {"name": cls.name, "description": cls.description, "input_schema": copy.deepcopy(schema)}

    @classmethod
    def schema_for(cls, edition: int) -> dict[str, Any]:
        """The schema as sessions of `edition` are offered it (runtime/tools/editions.py); a tool whose
        schema changed keeps its older ones here, most have only one."""
        return cls.schema()

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> BaseModel:
        try:
            return cls.Input.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {cls.name}: {problems}") from None


def safe_output(text: str, scanner: Any = None) -> str:
    """A result fit for the log and the model: no secrets, no NUL, no undecodable surrogates."""
    return scan_output(text, scanner).value


def scan_output(text: str, scanner: Any = None) -> Any:
    """safe_output, with how many secrets of each kind were cut (runtime/secret_scan.py: a Scan).
    Without a workspace's scanner every detector is on."""
    from chronicle.runtime.secret_scan import SecretScanner

    text = text.encode("utf-8", errors="backslashreplace").decode("utf-8").replace("\x00", "\\0")
    return (scanner or SecretScanner()).text(text)


def safe_blocks(blocks: list[dict[str, Any]] | None, scanner: Any = None) -> list[dict[str, Any]] | None:
    """Rich results (an MCP tool's) are recorded whole: every text in them gets the same redaction as `content`."""
    return scan_blocks(blocks, scanner)[0]


#: The fields of a result block that hold bytes as base64, not text: an image's or audio clip's `source.data`, a binary
#: resource's `resource.blob`. The scan would take them for tokens and cut them, and there is no text in them to scan.
BINARY_FIELDS = {"image": ("source", "data"), "audio": ("source", "data"), "resource": ("resource", "blob")}


def scan_blocks(blocks: list[dict[str, Any]] | None, scanner: Any = None) -> tuple[list[dict[str, Any]] | None, dict[str, int]]:
    """Every string of every block, whatever its kind, with how many secrets of each kind were cut. An MCP result
    carries its text in more than text blocks (structured content, an embedded resource's text, a link's uri and
    name) and all of it is recorded: scanning text blocks alone stored a token the `output` beside it had cut."""
    if not blocks:
        return blocks, {}
    counts: dict[str, int] = {}

    def scan(value: Any, skip: tuple[str, ...] | None) -> Any:
        if isinstance(value, str):
            found = scan_output(value, scanner)
            for kind, n in found.counts.items():
                counts[kind] = counts.get(kind, 0) + n
            return found.value
        if isinstance(value, dict):
            return {
                scan(k, None) if isinstance(k, str) else k: (x if skip == (k,) else scan(x, skip[1:] if skip and skip[0] == k else None))
                for k, x in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [scan(x, None) for x in value]
        return value

    return [scan(b, BINARY_FIELDS.get(b.get("type", ""))) for b in blocks], counts


def safe_error(ctx: ToolContext, message: str) -> str:
    """An error result names paths relative to the workspace: its absolute location is not the model's business."""
    from chronicle.runtime.secret_scan import scanner_for

    message = safe_output(message, scanner_for(ctx.workspace))
    for root in dict.fromkeys((str(ctx.workspace.expanduser().resolve()), str(ctx.workspace))):
        if root not in ("", ".", "/"):
            message = message.replace(root + "/", "").replace(root, ".")
    return message


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters not shown]"


def confine(workspace: Path, relative: str, store_url: str | None = None) -> Path:
    """Resolve a path inside the workspace; refuse anything that escapes it (.., absolute, symlinks)
    or that is the event store's (the `.chronicle/` directory, the SQLite files of `store_url`)."""
    from .sandbox import Sandbox

    return Sandbox.of(workspace, store_url).confine(relative)


class Toolbox:
    """The tools one agent may call, by name, described as the session's recorded tool edition says."""

    def __init__(self, tools: list[Tool], edition: int | None = None) -> None:
        from .editions import TOOL_EDITION

        self.tools = {t.name: t for t in tools}
        self.edition = TOOL_EDITION if edition is None else edition
        self._schemas: list[dict[str, Any]] | None = None

    def get(self, name: str) -> Tool | None:
        """The tool of that name; else the one tool whose name differs only in case (a model's `Read_File` for
        `read_file`, repaired as seed 002's loop repairs it, rather than failed as unknown); else None."""
        tool = self.tools.get(name)
        if tool is None:
            folded = [t for known, t in self.tools.items() if known.casefold() == name.casefold()]
            tool = folded[0] if len(folded) == 1 else None
        return tool

    def schemas(self) -> list[dict[str, Any]]:
        """Generated once per toolbox (pydantic regenerates a JSON schema on every call, ~1 ms a step)."""
        if self._schemas is None:
            self._schemas = [t.schema_for(self.edition) for t in self.tools.values()]
        return [dict(s) for s in self._schemas]

    def schemas_as(self, earlier: Any) -> list[dict[str, Any]]:
        """The schemas as a release before editions offered them (an `EarlierSchemas` of
        runtime/tools/editions.py): its changes apply to Chronicle's own tools, never to a user's namesake."""
        from .editions import builtin_tool

        return [earlier.apply(s) if builtin_tool(t) else s for t, s in zip(self.tools.values(), self.schemas(), strict=True)]

    def offer(self, schemas: list[dict[str, Any]]) -> None:
        """Ask with these schemas from now on: replay's, once it found those an older release recorded."""
        if [s["name"] for s in schemas] != list(self.tools):
            raise ValueError("offer: the schemas must name this toolbox's tools, in its order")
        self._schemas = [dict(s) for s in schemas]

    def names(self) -> list[str]:
        return list(self.tools)
