"""Section 6: added latency to the first token and per delta, Chronicle vs the raw anthropic SDK.

Both stream the same reply (a 600-character text cut into 3-character deltas, no delay between
events) from the loopback SSE server the provider's tests use (tests/sse_server.py).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, Callable

from common import Context, Section, median, ratio

ROOT = Path(__file__).resolve().parents[2]
TEXT = ("Streaming through the runtime should cost nothing a person could notice. " * 9)[:600]
SPLIT = 3


def _server() -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.sse_server import SSEServer, reply  # noqa: PLC0415

    return SSEServer().start(), reply


def _summary(started: float, times: list[float]) -> tuple[float, float, int]:
    first = (times[0] - started) * 1000
    per = (times[-1] - times[0]) * 1000 / max(1, len(times) - 1)
    return first, per, len(times)


async def _raw(url: str) -> tuple[float, float, int]:
    import anthropic

    started = time.perf_counter()  # like the provider, the raw path builds its client (TLS context) per run
    client = anthropic.AsyncAnthropic(api_key="bench-key", base_url=url, max_retries=0)
    times: list[float] = []
    async with client.messages.stream(model="claude-bench", max_tokens=1024, messages=[{"role": "user", "content": "go"}]) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                times.append(time.perf_counter())
    await client.close()
    return _summary(started, times)


def _chronicle(url: str, scratch: Path) -> tuple[float, float, int, float]:
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.live import Broker
    from chronicle.runtime.loop import AgentLoop, LoopOptions
    from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
    from chronicle.runtime.sessions import start_session
    from chronicle.runtime.store import ChronicleStore
    from chronicle.runtime.tools.base import Toolbox

    store = ChronicleStore(f"sqlite:///{scratch / 'stream.db'}")
    provider = AnthropicProvider("claude-bench", api_key="bench-key", base_url=url)
    times: list[float] = []
    called: list[float] = []
    broker = Broker()
    broker.subscribe(lambda e: times.append(time.perf_counter()) if e.type == "message_update" and e.delta.get("type") == "text" else None)
    real_stream = provider.stream

    async def stream(request: Any, on_delta: Any) -> Any:
        called.append(time.perf_counter())
        return await real_stream(request, on_delta)

    provider.stream = stream  # type: ignore[method-assign]
    loop = AgentLoop(store, provider, Toolbox([]), scratch, broker=broker, options=LoopOptions(max_iterations=2))
    session, _ = start_session(store, AgentSpec(name="main", model="claude-bench"), "go")
    started = time.perf_counter()
    outcome = asyncio.run(loop.run_next(session.id))
    store.close()
    if outcome is None or outcome.status != "completed":
        raise RuntimeError(f"chronicle streaming turn did not complete: {outcome}")
    first, per, n = _summary(called[0], times)
    return first, per, n, (times[0] - started) * 1000


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("streaming", "6. Streaming: added latency to the first token and per delta (loopback SSE server)")
    try:
        from chronicle.runtime.providers import anthropic_provider  # noqa: F401
    except ImportError as exc:
        return [s.unavailable(f"the Anthropic provider is not in this checkout ({exc})")]
    runs = 7 if ctx.plan.quick else 15
    server, reply = _server()
    raw: list[tuple] = []
    chron: list[tuple] = []
    try:
        for i in range(runs + 1):  # the first pair warms imports and is dropped
            server.script(reply([{"type": "text", "text": TEXT}], split=SPLIT))
            raw.append(asyncio.run(_raw(server.url)))
            server.script(reply([{"type": "text", "text": TEXT}], split=SPLIT))
            d = ctx.scratch / f"stream{i}"
            d.mkdir()
            chron.append(_chronicle(server.url, d))
    finally:
        server.stop()
    raw, chron = raw[1:], chron[1:]
    rf, rp = median([r[0] for r in raw]), median([r[1] for r in raw])
    cf, cp = median([c[0] for c in chron]), median([c[1] for c in chron])
    ce = median([c[3] for c in chron])
    log(f"  raw first {rf:.2f} ms, per delta {rp:.3f}; chronicle first {cf:.2f} (end to end {ce:.2f}), per delta {cp:.3f}")
    s.note(f"{raw[0][2]} text deltas per reply, {runs} runs each, medians. Chronicle's first token is timed from the "
           "provider call (both paths build their SDK client, with its TLS context, per run), and end to end from `run_next` (which first loads the session and commits the turn's start).")
    s.table(["path", "first token (ms)", "per delta (ms)", "added to first token (ms)", "added per delta (ms)", "per delta ÷ raw"], [
        ["raw anthropic SDK", rf, rp, 0.0, 0.0, 1.0],
        ["Chronicle (provider call → live event)", cf, cp, cf - rf, cp - rp, ratio(cp, rp)],
        ["Chronicle (run_next → live event)", ce, cp, ce - rf, cp - rp, ratio(cp, rp)],
    ])
    s.data = {"raw": raw, "chronicle": chron}
    return [s]
