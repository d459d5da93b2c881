"""`[mcp.NAME]` tables in chronicle.toml: which MCP servers exist, how to reach them, who gets them.

    [mcp.files]                          # a stdio server: Chronicle starts it
    command = "python"
    args = ["-m", "my_server"]
    env = { API_TOKEN = "${MY_TOKEN}" }  # ${VAR} is read from the environment
    agents = ["main", "researcher"]      # default: ["main"]
    trust_annotations = true             # believe the server's readOnlyHint / idempotentHint
    cwd = "tools"                        # where it runs: default the session's workspace; relative to it
    [mcp.files.tools.search]             # per-tool flags win over everything else
    requires_approval = false

    [mcp.tracker]                        # a streamable-HTTP server
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }

Nothing of this table is recorded (env and headers may hold secrets): each process reads it
again from the file named in the recorded tool list, so a resumed session reaches the server
the file describes now, and a server the file no longer defines gives an error result. What a
server is given as a secret (`McpServerConfig.secrets`) is cut from everything recorded, as the
process's own secrets are: a server may print what it was given.
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..app.errors import DefinitionError
from ..redaction import hold_secrets, is_secret_name

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SEPARATOR = "__"


def name_problem(name: str) -> str | None:
    """What is wrong with a server's name, or None: the model sees its tools as NAME__tool, which the Messages
    API limits to 64 characters, so a name is short, and its own words when it is too long."""
    if len(name) > 32:
        return f"a server name is at most 32 characters long (this one has {len(name)})"
    if not SERVER_NAME.match(name) or SEPARATOR in name:
        return f"server names start with a letter and use letters, digits, - and _ (no '{SEPARATOR}')"
    return None


class McpConfigError(ValueError):
    """An [mcp.NAME] table that cannot be used; the message names the file and the key."""


class McpToolFlags(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    read_only: bool | None = None
    idempotent: bool | None = None
    requires_approval: bool | None = None
    parallel_safe: bool | None = None


class McpServerConfig(BaseModel):
    """One server; in code, `McpServer(name="files", command="uvx", args=[...])` (chronicle.McpServer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = ""
    source: str = ""  # the file this table was read from, absolute
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    agents: list[str] = Field(default_factory=lambda: ["main"])
    trust_annotations: bool = False
    startup_timeout_s: float = Field(30.0, gt=0)
    tools: dict[str, McpToolFlags] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerConfig":
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable-HTTP server), not both or neither")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        return self

    @model_validator(mode="after")
    def _hold_secrets(self) -> "McpServerConfig":
        """Its secrets are cut from everything recorded from the moment the server is defined (read from the file,
        or made in code), before any of its tools runs: a server that prints the token it was given, or a model
        that repeats it, would otherwise put it in the log (runtime/redaction.py holds them in memory only)."""
        hold_secrets(self.secrets())
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def identity(self) -> tuple[Any, ...]:
        """What makes two configs the same server process (a changed file means a new connection)."""
        return (
            self.name,
            self.source,
            self.command,
            tuple(self.args),
            tuple(sorted(self.env.items())),
            self.cwd,
            self.url,
            tuple(sorted(self.headers.items())),
        )

    def in_workspace(self, workspace: str | Path | None) -> "McpServerConfig":
        """This server as a session in `workspace` starts it: a stdio server runs in the workspace (or in `cwd`,
        relative to it), as a tool the model calls would, so `args = ["--root", "."]` means the workspace and
        not wherever Chronicle was started. The resolved cwd is part of `identity()`: a process running
        sessions of several workspaces (serve, worker) starts one server per workspace."""
        if self.command is None:
            return self
        base = Path(workspace).expanduser().resolve() if workspace else Path.cwd()
        where = base / Path(self.cwd).expanduser() if self.cwd else base  # an absolute cwd stays as it is
        return self.model_copy(update={"cwd": str(where)})

    def resolved_env(self) -> dict[str, str]:
        hold_secrets(self.secrets())  # as the environment is now: a variable may have changed since the file was read
        return {k: expand(v, f"[mcp.{self.name}] env.{k}") for k, v in self.env.items()}

    def resolved_headers(self) -> dict[str, str]:
        hold_secrets(self.secrets())
        return {k: expand(v, f"[mcp.{self.name}] headers.{k}") for k, v in self.headers.items()}

    def secrets(self) -> list[str]:
        """What this server is given as a secret, as the environment expands it now (a variable not set is no
        value): every value a `${VAR}` brings into its env or headers (the file names the variable rather than
        write the value, as one does with a secret), but a variable every tool gets anyway (PATH, HOME, LANG...:
        runtime/tools/tool_env.py); and the whole value of an env key or header named as a secret holds
        (API_TOKEN, X-Api-Key, Authorization, Cookie), with the credential after an Authorization's scheme."""
        from .tool_env import ALLOWED, ALLOWED_PREFIXES

        found: list[str] = []
        for table, secret_key in ((self.env, is_secret_name), (self.headers, _secret_header)):
            for key, value in table.items():
                names = ENV_REF.findall(value)
                found += [os.environ[n] for n in names if n in os.environ and n not in ALLOWED and not n.startswith(ALLOWED_PREFIXES)]
                if secret_key(key) and all(n in os.environ for n in names):  # else it is never given: expand() refuses
                    whole = ENV_REF.sub(lambda m: os.environ[m.group(1)], value)
                    found.append(whole)
                    if scheme := SCHEME_AND_CREDENTIAL.fullmatch(whole):  # `Bearer TOKEN`: the token may be printed alone
                        found.append(scheme.group(1))
        return found


#: An Authorization-style value: a scheme, then the credential.
SCHEME_AND_CREDENTIAL = re.compile(r"[A-Za-z][A-Za-z0-9_-]* +(\S+)")


#: Headers that carry credentials without a secret-sounding name.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def _secret_header(name: str) -> bool:
    return name.lower() in CREDENTIAL_HEADERS or is_secret_name(name.replace("-", "_"))


def expand(value: str, where: str) -> str:
    """`${VAR}` from the environment, so tokens stay out of the file; a missing one is an error."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise McpConfigError(f"{where} names ${{{name}}}, which is not set in the environment")
        return os.environ[name]

    return ENV_REF.sub(one, value)


def parse_servers(raw: Any, source: Path) -> dict[str, McpServerConfig]:
    """The `mcp` table of a parsed chronicle.toml, checked; keys are server names."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise McpConfigError(f"{source}: [mcp] must hold tables [mcp.NAME]")
    servers: dict[str, McpServerConfig] = {}
    for name, table in raw.items():
        if (problem := name_problem(name)) is not None:
            raise McpConfigError(f"{source}: mcp.{name}: {problem}")
        if not isinstance(table, dict):
            raise McpConfigError(f"{source}: mcp.{name} must be a table")
        try:
            servers[name] = McpServerConfig.model_validate({**table, "name": name, "source": str(source)})
        except ValidationError as exc:
            raise McpConfigError(f"{source}: mcp.{name}{first_problem(exc)}") from None
    return servers


def first_problem(exc: ValidationError) -> str:
    """The first thing wrong with a server's fields, as `.FIELD: what` (`: what` for the whole)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{'.' + where if where else ''}: {message}"


@lru_cache(maxsize=16)
def _servers_in(path: str, mtime: float) -> dict[str, McpServerConfig]:
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise McpConfigError(f"cannot read MCP servers from {path}: {exc}") from None
    return parse_servers(raw.get("mcp"), Path(path))


#: Servers defined in code (`Agent(mcp_servers=[McpServer(...)])`) by this process, by name.
_CODE_SERVERS: dict[str, McpServerConfig] = {}
CODE_SOURCE = "code:"


def code_server(config: McpServerConfig) -> McpServerConfig:
    """A server defined in code: remembered by this process, recorded by name only (its env and
    headers may hold secrets). Another process resuming the session must define it again; the
    tool list stays the recorded one either way."""
    if (problem := name_problem(config.name)) is not None:
        raise McpConfigError(f"McpServer name {config.name!r}: {problem}")
    named = config.model_copy(update={"source": CODE_SOURCE + config.name})
    _CODE_SERVERS[config.name] = named  # without an Agent to go by (import_paths.scoped), the newest definition
    return named


def servers_in(path: str | Path) -> dict[str, McpServerConfig]:
    """The servers a file defines now (re-read when the file changes), or a code-defined one."""
    if str(path).startswith(CODE_SOURCE):
        name = str(path)[len(CODE_SOURCE):]
        from ..import_paths import scoped

        given = scoped("mcp_server", name)  # the running Agent's own server, whatever else took the name since
        if given is not None:
            return {name: given.model_copy(update={"source": CODE_SOURCE + name})}
        if name not in _CODE_SERVERS:
            raise McpConfigError(f"MCP server {name!r} was defined in code by the process that started this session; "
                                 f"pass it again with Agent(mcp_servers=[...]) (or define [mcp.{name}] in chronicle.toml)")
        return {name: _CODE_SERVERS[name]}
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        raise McpConfigError(f"{path}, which defined the MCP servers of this session, is gone") from None
    return _servers_in(str(path), mtime)


class McpServer(McpServerConfig):
    """A server as a program defines it (chronicle.McpServer): a field that cannot work is a DefinitionError
    (ChronicleError code 2, and a ValueError as pydantic's ValidationError was) naming it, where it was a
    multi-line ValidationError; a [mcp.NAME] table says the same as McpConfigError."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise DefinitionError(f"McpServer {data.get('name', '')!r}{first_problem(exc)}") from None
        if (problem := name_problem(self.name)) is not None:  # refused where it is written, not at the first run
            raise DefinitionError(f"McpServer name {self.name!r}: {problem}")
