"""MCP server connections for the whole process: started on first use, shared, stopped at exit.

The connections live in one background thread with its own event loop. The agent loops of a
process come and go (`run` makes one, `chat` and the worker several, sub-agents share their
parent's), but an MCP client session must stay in the event loop that opened it; a thread of
its own lets every agent loop, and plain synchronous code listing tools at session start, use
the same server process. Calls from an agent loop are handed over with
`run_coroutine_threadsafe`, so a cancelled or timed-out tool call cancels the request too.

A connection that fails (the server exits mid-call, the HTTP endpoint goes away) is dropped:
the call in flight gets an error that becomes the tool's error result, and the next call
starts the server again. `close()` runs at exit (the CLI turns SIGTERM into a normal exit), and
the SDK's stdio transport closes the server's stdin, then terminates its process tree.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Coroutine, TextIO, TypeVar

from .mcp_config import McpServerConfig

T = TypeVar("T")
#: How long closing a connection may take: the SDK's stdio transport closes the server's stdin, waits
#: 2 s for it to exit, then terminates its process tree (and kills it 2 s later if need be).
CLOSE_S = 10.0


class McpUnavailable(Exception):
    """The server cannot be reached or stopped during the call; the message says which and why."""


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def stderr_log(config: McpServerConfig) -> Path:
    """Where a stdio server's stderr goes: its log lines would otherwise interleave with our output."""
    return Path(tempfile.gettempdir()) / f"chronicle-mcp-{config.name}-{os.getuid() if hasattr(os, 'getuid') else 0}.log"


def open_stderr_log(path: Path) -> TextIO:
    """The log, readable by this user alone: a server's traceback can hold what its chronicle.toml `env` gave it
    (tokens), and the temporary directory is shared. Created 0600, an older file's mode tightened to it; a
    symbolic link is not followed, and a file another user owns (made there to read what we append) is refused."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        info = os.fstat(fd)
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to another user (uid {info.st_uid}); remove it: "
                                  "a server's log may hold its secrets, so it must be this user's alone")
        if info.st_mode & 0o077 and hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


#: The server whose connection task runs: the SDK's stdout reader is a task started inside it, so it reads the same.
_SERVER: contextvars.ContextVar[str] = contextvars.ContextVar("chronicle_mcp_server", default="?")


class _NotJsonRpc(logging.Filter):
    """The SDK logs a whole traceback for each line a stdio server writes to stdout that is not JSON-RPC (a
    banner, a log line printed to the wrong stream); the operator needs one line: which server, what it wrote,
    and that stdout is the protocol's channel."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith("Failed to parse JSONRPC message"):
            errors = getattr(record.exc_info[1], "errors", None)
            found = errors()[0].get("input") if callable(errors) and errors() else None
            record.msg = "MCP server %r wrote a line to stdout that is not JSON-RPC (its own logs belong on stderr): %s"
            record.args = (_SERVER.get(), repr(str(found)[:120]) if found is not None else "an unreadable line")
            record.exc_info, record.exc_text = None, None
        return True


def _quiet_sdk() -> None:
    stdio = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _NotJsonRpc) for f in stdio.filters):
        stdio.addFilter(_NotJsonRpc())


class _Connection:
    """One server, opened and closed inside one task of the hub's loop (the SDK's scopes need that)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.client: Any = None
        self.error: BaseException | None = None
        self.lock = asyncio.Lock()
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.closed.is_set()

    def _target(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        config = self.config
        if config.command is not None:
            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.resolved_env() or None, cwd=config.cwd
            )
            errlog = open_stderr_log(stderr_log(config))  # closed with the connection
            self._errlog = errlog
            return stdio_client(params, errlog=errlog)
        return streamable_http_client(str(config.url), http_client=create_mcp_http_client(headers=config.resolved_headers()))

    async def open(self) -> Any:
        async with self.lock:
            if self.alive:
                return self.client
            self.ready, self.closed, self.stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
            self.error = None
            self.task = asyncio.create_task(self._run())
            try:
                await asyncio.wait_for(self.ready.wait(), self.config.startup_timeout_s)
            except asyncio.TimeoutError:
                await self.close()
                raise McpUnavailable(
                    f"MCP server {self.config.name!r} did not start within {self.config.startup_timeout_s:g} s"
                ) from None
            if not self.alive:
                raise McpUnavailable(
                    f"MCP server {self.config.name!r} is unavailable: {_describe(self.error) if self.error else 'closed'}"
                )
            return self.client

    async def _run(self) -> None:
        from mcp import Client

        _quiet_sdk()
        _SERVER.set(self.config.name)  # this task's own context: the SDK's reader tasks inherit it
        try:
            async with Client(self._target()) as client:
                self.client = client
                self.ready.set()
                await self.stop.wait()
        except Exception as exc:  # noqa: BLE001 - a failed or broken connection is reported to its callers
            self.error = exc
        finally:
            self.client = None
            self.closed.set()
            self.ready.set()
            errlog = getattr(self, "_errlog", None)
            if errlog is not None:
                errlog.close()

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        client = await self.open()
        request = asyncio.create_task(client.call_tool(tool, arguments))
        gone = asyncio.create_task(self.closed.wait())
        try:
            done, _ = await asyncio.wait({request, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            request.cancel()
            raise
        finally:
            gone.cancel()
        if request in done:
            try:
                return request.result()
            except Exception as exc:
                await self.close()  # whatever broke, the next call starts afresh
                raise McpUnavailable(f"MCP server {self.config.name!r} failed during the call: {_describe(exc)}") from None
        request.cancel()
        reason = _describe(self.error) if self.error else "the connection closed"
        raise McpUnavailable(f"MCP server {self.config.name!r} stopped during the call ({reason})")

    async def list_tools(self) -> list[Any]:
        """The server's tools, all pages. A server that completes the handshake but never answers tools/list is
        given `startup_timeout_s` for it too, then stopped, and said to be that, not a server that did not start."""
        client = await self.open()
        tools: list[Any] = []

        async def pages() -> list[Any]:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

        try:
            return await asyncio.wait_for(pages(), self.config.startup_timeout_s)
        except asyncio.TimeoutError:
            await self.close()
            raise McpUnavailable(f"MCP server {self.config.name!r} started but did not list its tools within "
                                 f"{self.config.startup_timeout_s:g} s") from None

    async def close(self) -> None:
        """End the connection. One that is up ends its session politely (up to CLOSE_S); one still
        starting has no session to end, and waiting for `stop` would wait for a handshake that may
        never come (10 s more after startup_timeout_s, then the SDK's cleanup at exit): it is cancelled
        at once, and the SDK's transport stops the server (its grace period, then the process tree)."""
        self.stop.set()
        task = self.task
        if task is None or task.done():
            return
        if self.client is None:  # still starting
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()


class McpHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[tuple[Any, ...], _Connection] = {}
        self._registered = False

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="chronicle-mcp", daemon=True)
                thread.start()
                if not self._registered:
                    atexit.register(self.close)
                    self._registered = True
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    def _connection(self, config: McpServerConfig) -> _Connection:
        key = config.identity()
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = _Connection(config)
        return connection

    async def call_tool(self, config: McpServerConfig, tool: str, arguments: dict[str, Any]) -> Any:
        """From any event loop: the server's CallToolResult, or McpUnavailable."""

        async def call() -> Any:
            return await self._connection(config).call(tool, arguments)

        return await asyncio.wrap_future(self._submit(call()))

    def list_tools(self, config: McpServerConfig) -> list[Any]:
        """Synchronously: the server's tools (mcp Tool objects), or McpUnavailable."""

        async def listing() -> list[Any]:
            return await self._connection(config).list_tools()

        return self._submit(listing()).result(timeout=2 * config.startup_timeout_s + 30)  # starting, then listing

    def running(self) -> list[str]:
        return sorted(c.config.name for c in self._connections.values() if c.alive)

    def close(self) -> None:
        """Stop every server (idempotent); called at exit."""
        loop = self._loop
        if loop is None:  # not `not loop.is_running()`: a loop whose thread has not started it yet is stopped once it does
            return

        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in list(self._connections.values())), return_exceptions=True)

        thread = self._thread
        if thread is not None and thread.is_alive():  # a dead thread runs nothing: asking it would wait 15 s
            try:
                asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout=15)
            except Exception:  # noqa: BLE001 - exiting anyway; the servers' stdin is closed with our process
                pass
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        self._connections.clear()
        if not loop.is_running():  # stopped: its selector and self-pipe go now, not whenever it is collected
            loop.close()
        with self._lock:
            self._loop, self._thread = None, None  # a later use starts afresh (tests, long-lived hosts)


HUB = McpHub()
