"""A loopback HTTP server that speaks the Messages API's SSE format, from a queue of behaviours.

Tests point the real `anthropic` SDK at it (base_url / ANTHROPIC_BASE_URL) and script what
each request gets: a normal stream, an HTTP error with or without retry-after, an overload
inside a 200 stream, a slow stream to cancel, a stream that stalls with only pings, a dropped connection. Every request is recorded
(path, headers, JSON body) so tests can check what the client sent; a stream the client
closed early is noted on its record. Like the real API, it refuses (400 invalid_request_error) a
Messages request whose messages hold tool_use/tool_result blocks but which defines no tools, and one
that sends a block back with a field the API does not define (`partial_input_json`). Runs in a thread on 127.0.0.1 with a random port.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

# -- building SSE event lists --------------------------------------------------------------------


def _chunks(text: str, splits: list[int] | int | None) -> list[str]:
    """Cut text at the given offsets (or into pieces of N characters)."""
    if splits is None:
        return [text] if text else []
    if isinstance(splits, int):
        return [text[i:i + splits] for i in range(0, len(text), splits)] or [""]
    cuts = sorted({0, *[s for s in splits if 0 < s < len(text)], len(text)})
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def message_events(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-4-5",
    split: list[int] | int | None = 7,
    stop_sequence: str | None = None,
    msg_id: str = "msg_test",
    stop_details: dict[str, Any] | None = None,
    final_usage: dict[str, Any] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The events the API sends for one message: text (with citations), thinking, tool input and
    server tool input split into deltas; any other block type (web_search_tool_result, …) is sent
    whole in its content_block_start, as the API does.

    `usage` is what message_start reports (output_tokens there is 1, as in real streams); the
    final message_delta carries `final_usage` if given, else the real API's cumulative shape: the
    output tokens plus every count reported so far, and `server_tool_use` when present.
    """
    usage = {"input_tokens": 10, "output_tokens": 5, **(usage or {})}
    start_usage = {k: v for k, v in usage.items() if k not in ("output_tokens", "server_tool_use")} | {"output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], split)]
            if "citations" in block:
                # Real streams open a cited text block with "citations": [] and send each citation
                # as its own citations_delta before the text it supports.
                start["citations"] = []
                deltas = [{"type": "citations_delta", "citation": c} for c in block["citations"] or []] + deltas
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"], split)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "redacted_thinking":
            start, deltas = dict(block), []
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            start = {k: v for k, v in block.items() if k not in ("input", "raw_json", "split")} | {"input": {}}
            raw = block.get("raw_json", json.dumps(block["input"], ensure_ascii=False))
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(raw, block.get("split", split))]
        else:
            start, deltas = dict(block), []
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        for delta in deltas:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
    if final_usage is None:
        final_usage = {k: v for k, v in usage.items() if k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens", "server_tool_use")}
    delta: dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
    if stop_details is not None:
        delta["stop_details"] = stop_details
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


#: Usage as real responses report it (2026): the 5m/1h split of cache writes, the service tier,
#: where inference ran, and the server-side tool requests.
FULL_USAGE: dict[str, Any] = {
    "input_tokens": 1200, "output_tokens": 310, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 4000,
    "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 300},
    "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
    "service_tier": "standard", "inference_geo": "us",
}


def web_search_blocks(query: str = "chronicle event sourcing") -> list[dict[str, Any]]:
    """A server-side web search as the API streams it: the call, its encrypted results, and an
    answer whose text cites them (with unknown fields a newer API might add)."""
    return [
        {"type": "text", "text": "Let me search."},
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": query},
         "caller": {"type": "direct"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "caller": {"type": "direct"}, "content": [
            {"type": "web_search_result", "url": "https://example.org/es", "title": "Event sourcing",
             "encrypted_content": "EqwBCioIAhgBIiQ0ZmQ5…", "page_age": "2 days ago"},
        ]},
        {"type": "text", "text": "Event sourcing records every change.", "citations": [
            {"type": "web_search_result_location", "url": "https://example.org/es", "title": "Event sourcing",
             "encrypted_index": "Eo8BCioIAhgB…", "cited_text": "records every change"},
        ]},
    ]


def refusal(text: str = "") -> Stream:
    """A streaming refusal: what was said before it (possibly an empty text block) and stop_details."""
    return Stream(message_events(
        [{"type": "text", "text": text}], stop_reason="refusal",
        stop_details={"type": "refusal", "category": "cyber", "explanation": "This request asks for malware."},
    ))


CUT_JSON = '{"path": "notes.txt", "content": "The first line\\nand the sec'


def cut_tool_input(raw: str = CUT_JSON, text: str = "Writing it.") -> Stream:
    """max_tokens hit inside a tool_use's input: the JSON never closes, yet content_block_stop comes."""
    cut = {"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {}, "raw_json": raw}
    return Stream(message_events(
        [{"type": "text", "text": text}, cut],
        stop_reason="max_tokens",
    ))


def error_event(error_type: str = "overloaded_error", message: str = "Overloaded") -> tuple[str, dict[str, Any]]:
    return ("error", {"type": "error", "error": {"type": error_type, "message": message}})


# -- behaviours ----------------------------------------------------------------------------------


@dataclass
class Stream:
    """HTTP 200 with these SSE events; `delay_s` between events; `hang_after` events then wait,
    sending keep-alive comments, or with `ping_every_s` a `ping` event that often (the API's own
    keep-alive: the connection is never silent, yet no content comes)."""

    events: list[tuple[str, dict[str, Any]]]
    delay_s: float = 0.0
    hang_after: int | None = None
    drop_after: int | None = None
    ping_every_s: float | None = None


@dataclass
class HttpError:
    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class DropConnection:
    """Close the socket without answering."""


def reply(content: list[dict[str, Any]], **kwargs: Any) -> Stream:
    has_tools = any(b["type"] == "tool_use" for b in content)
    kwargs.setdefault("stop_reason", "tool_use" if has_tools else "end_turn")
    delay = kwargs.pop("delay_s", 0.0)
    return Stream(message_events(content, **kwargs), delay_s=delay)


def overloaded_in_stream(after_text: str = "") -> Stream:
    events = message_events([{"type": "text", "text": after_text}] if after_text else [])[:-2]
    events = [e for e in events if e[0] not in ("message_delta", "message_stop")]
    return Stream(events + [error_event()])


# -- the server ----------------------------------------------------------------------------------


def is_title_request(body: dict[str, Any]) -> bool:
    """The auxiliary title call (runtime/titles.py): no tools, the title instruction as system prompt."""
    system = body.get("system") or [m for m in body.get("messages", []) if m.get("role") == "system"]  # Messages API or chat
    return not body.get("tools") and "Write a short title" in json.dumps(system)


TOOLS_REQUIRED = "Requests which include tool_use or tool_result blocks must define tools."  # as anthropic-sdk-python#494 quotes it


def tool_blocks_without_tools(path: str, body: dict[str, Any]) -> bool:
    """A Messages API request the real API refuses with 400 invalid_request_error (TOOLS_REQUIRED):
    its messages hold tool_use or tool_result blocks and it defines no tools."""
    if not path.rstrip("/").endswith("/messages") or body.get("tools"):
        return False
    return any(isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
               for message in body.get("messages") or [] if isinstance(message.get("content"), list)
               for block in message["content"])


def unknown_block_field(path: str, body: dict[str, Any]) -> str | None:
    """The real API's 400 for a Messages request that sends a block back with a field the API does not
    define: Chronicle's own record-keeping key `partial_input_json` (a tool input cut mid-JSON) must
    never reach it, whatever the block's type."""
    if not path.rstrip("/").endswith("/messages"):
        return None
    for number, message in enumerate(body.get("messages") or []):
        for index, block in enumerate(message.get("content") if isinstance(message.get("content"), list) else []):
            if isinstance(block, dict) and "partial_input_json" in block:
                return f"messages.{number}.content.{index}.{block.get('type')}.partial_input_json: Extra inputs are not permitted"
    return None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    closed_early: bool = False


class SSEServer:
    def __init__(self) -> None:
        self.behaviours: "queue.Queue[Any]" = queue.Queue()
        self.requests: list[Recorded] = []
        self.title_requests: list[Recorded] = []
        #: Requests refused as the real API would refuse them (tool blocks without tools).
        self.refused: list[Recorded] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                record = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"), raw)
                refusal = TOOLS_REQUIRED if tool_blocks_without_tools(self.path, record.body) else unknown_block_field(self.path, record.body)
                if refusal:
                    # Refused as the real API refuses it, before any scripted behaviour is spent on it.
                    server.refused.append(record)
                    server._answer(self, HttpError(400, "invalid_request_error", refusal), record)
                    return
                if is_title_request(record.body):
                    # Session titles are auxiliary calls made alongside the first turn; they get a
                    # canned answer so that the scripted behaviours stay the agent's own.
                    server.title_requests.append(record)
                    server._answer(self, server.title_reply(), record)
                    return
                server.requests.append(record)
                try:
                    behaviour = server.behaviours.get_nowait()
                except queue.Empty:
                    behaviour = HttpError(400, "invalid_request_error", "sse_server: no scripted behaviour left for this request")
                server._answer(self, behaviour, record)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *behaviours: Any) -> "SSEServer":
        for behaviour in behaviours:
            self.behaviours.put(behaviour)
        return self

    def start(self) -> "SSEServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    def title_reply(self) -> Any:
        return reply([{"type": "text", "text": "A title"}], usage={"input_tokens": 0, "output_tokens": 0})

    @staticmethod
    def sse_frame(name: str | None, data: Any) -> bytes:
        head = f"event: {name}\n" if name else ""
        return f"{head}data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n".encode()

    def _answer(self, handler: BaseHTTPRequestHandler, behaviour: Any, record: Recorded) -> None:
        if isinstance(behaviour, DropConnection):
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        if isinstance(behaviour, HttpError):
            body = json.dumps({"type": "error", "error": {"type": behaviour.error_type, "message": behaviour.message}}).encode()
            handler.send_response(behaviour.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(body)))
            handler.send_header("request-id", "req_test")
            for key, value in behaviour.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("request-id", "req_stream_test")  # Anthropic's header name
        handler.send_header("x-request-id", "req_stream_test")  # OpenAI's
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.close_connection = True
        try:
            for number, (name, data) in enumerate(behaviour.events):
                if behaviour.drop_after is not None and number >= behaviour.drop_after:
                    handler.wfile.flush()
                    handler.connection.shutdown(2)
                    return
                handler.wfile.write(self.sse_frame(name, data))
                handler.wfile.flush()
                if behaviour.hang_after is not None and number + 1 >= behaviour.hang_after:
                    # Wait for the client to go away (or the test to end), probing the socket.
                    probe = self.sse_frame("ping", {"type": "ping"}) if behaviour.ping_every_s else b": keep-alive\n\n"
                    while not self.release.wait(behaviour.ping_every_s or 0.02):
                        handler.wfile.write(probe)
                        handler.wfile.flush()
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)
        except (BrokenPipeError, ConnectionResetError, OSError):
            record.closed_early = True


try:
    import pytest

    @pytest.fixture
    def sse():
        """A running SSEServer for one test; import this fixture into a test module to use it."""
        server = SSEServer().start()
        yield server
        server.stop()
except ImportError:  # pragma: no cover - usable without pytest too
    pass
