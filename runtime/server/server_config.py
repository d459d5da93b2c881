"""What a server is started with (`ServerConfig`: `chronicle serve`'s flags, `Chronicle.http_app`'s arguments), and
what of it `create_app` refuses before anything runs.

A setting that would be taken and then do nothing (`extra`, which nothing reads; `worker_concurrency` with no
worker here) or could not work (a blank token, a workspace that is not a directory, code agents that could not
start) is refused naming the field, as a flag `serve` refuses: a server that starts must do what it was told.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass
class ServerConfig:
    db: str | None = None
    workspace: Path | None = None
    agents: Path | None = None
    token: str | None = None
    #: The largest request body read (None: CHRONICLE_SERVER_MAX_BODY_BYTES, 2 MiB by default).
    max_body_bytes: int | None = None
    run_worker: bool = True
    #: Sessions the server's worker advances at once (`serve --concurrency`); None: 4, as `chronicle worker`. Refused
    #: with run_worker off: the worker that runs the sessions then is another process, with its own --concurrency.
    worker_concurrency: int | None = None
    auto_approve: bool = False
    #: The store of `db`, opened already (`chronicle serve` opens it first, to report a failure on one line).
    store: Any = None
    #: Agents defined in code (`chronicle.Agent`), startable by name like those of the registry file.
    library: tuple[Any, ...] = ()
    #: Seconds a stopping server waits for its worker's turns in hand before leaving them to their leases (`serve
    #: --drain-s`); None: 30. Refused with run_worker off: there is nothing here to wait for.
    drain_s: float | None = None
    #: Where each line the server's worker logs goes (`chronicle worker`'s lines); None: the `chronicle.server` logger
    #: at INFO. Refused with run_worker off, as there are no such lines.
    worker_log: Callable[[str], Any] | None = None
    #: Read by nothing: a non-empty one is refused (ChronicleError code 2) rather than taken and dropped. Kept so
    #: that a program passing `extra={}` still builds.
    extra: dict[str, Any] = field(default_factory=dict)


def refused_settings(config: ServerConfig) -> str | None:
    """What `create_app` refuses in a ServerConfig, naming the field: a setting that would be taken and then do nothing
    (`extra`, which nothing reads; `worker_concurrency` with no worker here) or could not work (no worker slot)."""
    if config.token is not None and (not isinstance(config.token, str) or not config.token.strip()):
        what = "blank" if isinstance(config.token, str) else f"takes text, got {type(config.token).__name__}"
        return f"token: {what}; pass a token, or None for none"
    if not isinstance(config.run_worker, bool):
        return f"run_worker: takes True or False, got {config.run_worker!r}"
    if config.workspace is not None and not Path(config.workspace).expanduser().is_dir():
        return f"workspace {config.workspace} is not a directory; pass an existing one with --workspace"
    if refusal := refused_agents(config):
        return refusal
    if config.extra:
        return (f"ServerConfig.extra: the server reads no extra settings ({', '.join(map(str, config.extra))}); "
                "take it out, or use the field or chronicle.toml table that says it")
    if refusal := refused_worker_settings(config):
        return refusal
    given = config.worker_concurrency
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        return f"worker_concurrency: takes a whole number ≥ 1 (sessions the server's worker advances at once), got {given!r}"
    if not config.run_worker:
        return ("worker_concurrency: this server runs no worker (run_worker is off); the worker that runs its sessions "
                "decides (`chronicle worker --concurrency K`)")
    return None


def refused_worker_settings(config: ServerConfig) -> str | None:
    """`drain_s` and `worker_log`: a number of seconds and a callable, and only for a server that runs a worker."""
    drain = config.drain_s
    if drain is not None and (isinstance(drain, bool) or not isinstance(drain, (int, float)) or not math.isfinite(drain)
                              or drain < 0):
        return f"drain_s: takes a number of seconds ≥ 0 (how long a stopping server waits for its turns), got {drain!r}"
    if config.worker_log is not None and not callable(config.worker_log):
        return f"worker_log: takes a function of one line (str), got {type(config.worker_log).__name__}"
    if not config.run_worker and (drain is not None or config.worker_log is not None):
        field_name = "drain_s" if drain is not None else "worker_log"
        return (f"{field_name}: this server runs no worker (run_worker is off), so it has no turns to wait for and no "
                "worker lines; the worker that runs its sessions (`chronicle worker`) has its own")
    return None


def refused_agents(config: ServerConfig) -> str | None:
    """Code-defined agents POST /sessions could not start: each is checked now (its sub-agents, its MCP servers), as
    `run` checks it, rather than as a 400 on the first request that names it; two of one name would leave one unreachable."""
    from chronicle.agent import Agent

    names: set[str] = set()
    for agent in config.library:
        if not isinstance(agent, Agent):
            return f"agents: expected Agent objects, got {type(agent).__name__}: define each with chronicle.Agent(...)"
        if agent.name in names:
            return f"agents: two are named {agent.name!r}; give each its own name (POST /sessions names the one to start)"
        names.add(agent.name)
        try:
            agent.registry(config.workspace)
        except ValueError as exc:
            return str(exc)
    return None
