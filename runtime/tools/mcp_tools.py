"""MCP tools as Chronicle tools: `SERVER__tool`, the server's schema, our flags, results as data.

The tool list an agent sees is taken from the servers once, when its session starts, and
recorded on the session's AgentSpec (`mcp_tools`: names, descriptions, schemas, flags and the
file that defines the server — never its env or headers). Every later turn, resume and replay
builds its tools from that record, so what the model was offered never changes under a
session; a tool the server no longer has, or a server that is down, answers with an error
result the model reads, like any failing tool.

Flags: an MCP tool requires approval unless the config trusts the server's annotations
(`trust_annotations = true`) and the server marks it read-only; `[mcp.NAME.tools.TOOL]` flags win.
Results: text as text, structured content as JSON when there is no text, images and other
binary content as a one-line note in the text the model reads, with the blocks recorded on the
tool call, their text bounded as the model's is (images and other binary content kept whole).
The tool runner then stores images once by content (runtime/attachments.py) and the loop shows
them to the model as image blocks right after the results.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from .base import MAX_OUTPUT_CHARS, Tool, ToolContext, ToolError, ToolOutput, truncate
from .mcp_config import SEPARATOR, McpConfigError, McpServerConfig, servers_in
from .mcp_hub import HUB, McpUnavailable

TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64


class McpArguments(BaseModel):
    """The arguments as the model sent them: the server validates them against its own schema."""

    model_config = ConfigDict(extra="allow")

    def values(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class McpTool(Tool):
    """One tool of one MCP server; one subclass per recorded entry (flags are class attributes, as on built-ins)."""

    Input = McpArguments
    server: ClassVar[str]
    remote_name: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]
    config_path: ClassVar[str]

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return {"name": cls.name, "description": cls.description, "input_schema": dict(cls.input_schema)}

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> BaseModel:
        if not isinstance(raw, dict):
            raise ToolError(f"invalid arguments for {cls.name}: an object is required")
        return McpArguments.model_validate(raw)

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        cls = type(self)
        try:
            config = servers_in(cls.config_path).get(cls.server)
        except McpConfigError as exc:
            raise ToolError(str(exc)) from None
        if config is None:
            raise ToolError(f"MCP server {cls.server!r} is no longer defined in {cls.config_path}")
        try:
            result = await HUB.call_tool(config.in_workspace(ctx.workspace), cls.remote_name, args.values())
        except (McpUnavailable, McpConfigError) as exc:
            raise ToolError(str(exc)) from None
        return convert_result(result)


def public_name(server: str, tool: str) -> str:
    """`SERVER__tool`, within the characters and length the model APIs accept."""
    name = f"{server}{SEPARATOR}{TOOL_NAME.sub('_', tool)}"
    if len(name) > MAX_NAME:
        name = _with_digest(name, tool)
    return name


def _with_digest(name: str, tool: str) -> str:
    return f"{name[: MAX_NAME - 9]}_{hashlib.sha256(tool.encode()).hexdigest()[:8]}"


def public_names(server: str, tools: list[str]) -> list[str]:
    """Each tool's `SERVER__tool`, distinct: `a.b` and `a_b` both clean to `SERVER__a_b`, and one would silently
    replace the other in the agent's toolbox. A tool whose name cleaning changed and that clashes gets the digest
    of its own name as a suffix (`SERVER__a_b_1a2b3c4d`), the one whose name is already valid keeps it: the same
    names whatever order the server lists them in. A clash left (a server listing one name twice) is refused."""
    plain = [public_name(server, tool) for tool in tools]
    counts = Counter(plain)
    names = [_with_digest(name, tool) if counts[name] > 1 and name != f"{server}{SEPARATOR}{tool}" else name
             for tool, name in zip(tools, plain, strict=True)]
    seen: dict[str, str] = {}
    for tool, name in zip(tools, names, strict=True):
        if name in seen:
            raise McpConfigError(f"MCP server {server!r} lists two tools the model would both see as {name!r}: "
                                 f"{seen[name]!r} and {tool!r}")
        seen[name] = tool
    return names


def renamed(entry: dict[str, Any]) -> bool:
    """Whether a listed tool got a digest suffix because its cleaned name clashed with another tool's (`mcp list`)."""
    return bool(entry["name"] != public_name(entry["server"], entry["tool"]))


def flags_for(config: McpServerConfig, tool: Any) -> dict[str, bool]:
    annotations = getattr(tool, "annotations", None)
    trusted = config.trust_annotations and annotations is not None
    read_only = bool(trusted and getattr(annotations, "read_only_hint", False))
    flags = {
        "read_only": read_only,
        "idempotent": bool(read_only or (trusted and getattr(annotations, "idempotent_hint", False))),
        "requires_approval": not read_only,
        "parallel_safe": read_only,
    }
    overrides = config.tools.get(tool.name)
    if overrides is not None:
        flags.update({k: v for k, v in overrides.model_dump().items() if v is not None})
    return flags


def describe_tools(config: McpServerConfig, tools: list[Any]) -> list[dict[str, Any]]:
    """What gets recorded on a session for each tool of a server."""
    entries = []
    for tool, name in zip(tools, public_names(config.name, [tool.name for tool in tools]), strict=True):
        entries.append(
            {
                "name": name,
                "server": config.name,
                "tool": tool.name,
                "description": tool.description or tool.title or "",
                "input_schema": tool.input_schema or {"type": "object"},
                "flags": flags_for(config, tool),
                "config": config.source,
            }
        )
    return entries


def list_server_tools(config: McpServerConfig, workspace: str | Path | None) -> list[dict[str, Any]]:
    """The server's tools as a session in `workspace` records them (a stdio server is started there)."""
    try:
        return describe_tools(config, HUB.list_tools(config.in_workspace(workspace)))
    except McpUnavailable as exc:
        raise McpConfigError(str(exc)) from None
    except TimeoutError:
        raise McpConfigError(f"MCP server {config.name!r} did not list its tools in time") from None


def tools_for_agent(agent: str, servers: dict[str, McpServerConfig], workspace: str | Path | None) -> tuple[dict[str, Any], ...]:
    """The recorded tool list for one agent: every tool of every server that names the agent."""
    entries: list[dict[str, Any]] = []
    for config in servers.values():
        if agent in config.agents:
            entries.extend(list_server_tools(config, workspace))
    return tuple(entries)


def tool_class(entry: dict[str, Any]) -> type[McpTool]:
    flags = entry.get("flags") or {}
    return type(
        f"Mcp_{entry['name']}",
        (McpTool,),
        {
            "name": entry["name"],
            "description": entry.get("description", ""),
            "server": entry["server"],
            "remote_name": entry["tool"],
            "input_schema": entry.get("input_schema") or {"type": "object"},
            "config_path": entry.get("config", ""),
            "read_only": bool(flags.get("read_only")),
            "idempotent": bool(flags.get("idempotent")),
            "requires_approval": bool(flags.get("requires_approval", True)),
            "parallel_safe": bool(flags.get("parallel_safe")),
        },
    )


def mcp_tools(entries: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[Tool]:
    return [tool_class(entry)() for entry in entries]


# -- results --------------------------------------------------------------------------------------


def decoded_size(data: str) -> int:
    """The bytes base64 `data` holds, counted without decoding it: each `=` of padding is one byte fewer than
    len*3/4 (a 71-byte PNG was said to be 72 bytes)."""
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def convert_result(result: Any) -> ToolOutput:
    """An MCP CallToolResult as our ToolOutput: text for the model, every block for the record, bounded as the text is."""
    texts: list[str] = []
    blocks: list[dict[str, Any]] = []
    budget = TextBudget()
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)
            blocks.append({"type": "text", "text": budget.cut(item.text)})
        elif kind in ("image", "audio"):
            size = decoded_size(item.data)
            texts.append(f"[{kind}: {item.mime_type}, {size} bytes]")
            blocks.append({"type": kind, "source": {"type": "base64", "media_type": item.mime_type, "data": item.data}})
        elif kind == "resource":
            resource = item.resource
            dumped = resource.model_dump(mode="json", by_alias=True)
            if getattr(resource, "text", None) is not None:
                texts.append(resource.text)
                dumped["text"] = budget.cut(resource.text)
            else:
                texts.append(f"[resource {resource.uri}: {resource.mime_type or 'binary'}]")
            blocks.append({"type": "resource", "resource": dumped})
        elif kind == "resource_link":
            texts.append(f"[resource link: {item.uri}{' — ' + item.description if item.description else ''}]")
            blocks.append({"type": "resource_link", "uri": budget.cut(str(item.uri)), "name": budget.cut(item.name)})
        else:
            texts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        blocks.append(structured_block(structured))
        if not texts:
            texts.append(json.dumps(structured, ensure_ascii=False))
    return ToolOutput(truncate("\n".join(texts)), is_error=bool(getattr(result, "is_error", False)), blocks=blocks)


class TextBudget:
    """The text of a result's blocks kept as `content` is, to its first MAX_OUTPUT_CHARS characters in all, with the
    same note: blocks kept whole made a 3 MB result a 2.3 MB event while the text beside them was cut to 30,000."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.left = limit

    def cut(self, text: str) -> str:
        kept = truncate(text, self.left)
        self.left = max(0, self.left - len(text))
        return kept


def structured_block(structured: Any) -> dict[str, Any]:
    """Structured content as the server sent it when its JSON fits in MAX_OUTPUT_CHARS; else that JSON as text (`json`),
    cut as any text is: an object cannot be cut and stay one. It has its own budget: it is the server's copy of the
    result (the SDK makes one of every result), which the text blocks before it have already spent."""
    dumped = json.dumps(structured, ensure_ascii=False)
    if len(dumped) <= MAX_OUTPUT_CHARS:
        return {"type": "structured", "content": structured}
    return {"type": "structured", "json": truncate(dumped)}
