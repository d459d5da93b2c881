"""The server's live event streams share one look at the log's head: many viewers of a session where nothing happens
cost the store one query per interval, not one per stream (each stream used to look for itself five times a second,
reading its session too: a hundred idle viewers took a third of a core). Each stream still reads what is new once
the head moves, and all of them end at once when the server stops."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from chronicle import Agent, Chronicle
from chronicle.runtime.server.event_stream import STREAM_POLL_S, LogHead, event_stream
from tests.helpers import response, sqlite_statements, text

STREAMS = 20


def gated(tmp_path: Path) -> tuple[Agent, Path, Path]:
    """An agent whose answer waits for the file `gate`; `asked` appears once the model call has begun."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        response(text("at last"), until_file="gate", started_file="asked")]}}), encoding="utf-8")
    return Agent(provider=f"scripted:{script}"), tmp_path / "gate", tmp_path / "asked"


async def _connected() -> bool:
    return False


def _head_looks(statements: list[str]) -> int:
    return sum(1 for s in statements if "max(" in s.lower())


async def _waited(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def test_many_streams_of_a_quiet_turn_look_at_the_head_together_and_all_see_its_end(tmp_path, workspace):
    agent, gate, asked = gated(tmp_path)
    url = f"sqlite:///{tmp_path / 'chronicle.db'}"

    async def scenario() -> tuple[int, float, list[list[str]]]:
        with sqlite_statements() as statements, Chronicle(url) as app:
            running = asyncio.ensure_future(asyncio.to_thread(app.run_sync, agent, "wait", workspace=str(workspace)))
            await _waited(asked.exists, "the model call did not begin")
            sid = app.sessions()[0]["session_id"]
            heads = LogHead(app)
            seen: list[list[str]] = [[] for _ in range(STREAMS)]

            async def follow(k: int) -> None:
                async for chunk in event_stream(app, sid, 0, True, _connected, lambda: False, heads):
                    seen[k].append(chunk.decode())

            streams = [asyncio.ensure_future(follow(k)) for k in range(STREAMS)]
            await _waited(lambda: all(any('"turn_start"' in c for c in chunks) for chunks in seen), "the past was not sent")
            looks_before = _head_looks(statements)
            quiet = 1.5
            await asyncio.sleep(quiet)
            looks = _head_looks(statements) - looks_before

            gate.touch()  # the log moves: every stream reads what is new, and ends with the turn
            assert (await running).status == "completed"
            await asyncio.wait_for(asyncio.gather(*streams), 60)
            return looks, quiet, seen

    looks, quiet, seen = asyncio.run(scenario())
    # One look per interval for all twenty, beside the running turn's own checks for a cancel (the same query): each
    # stream alone made one per interval (150 here), and read its session too.
    assert looks <= 2 * quiet / STREAM_POLL_S + 5, looks
    for chunks in seen:
        assert any("at last" in c for c in chunks) and '"agent_end"' in chunks[-1]


def test_a_stopping_server_ends_every_stream_at_the_next_look(tmp_path, workspace):
    agent, gate, asked = gated(tmp_path)
    url = f"sqlite:///{tmp_path / 'chronicle.db'}"
    stopping = [False]

    async def scenario() -> float:
        with Chronicle(url) as app:
            running = asyncio.ensure_future(asyncio.to_thread(app.run_sync, agent, "wait", workspace=str(workspace)))
            await _waited(asked.exists, "the model call did not begin")
            sid = app.sessions()[0]["session_id"]
            heads = LogHead(app, stopping=lambda: stopping[0])
            opened = [0]

            async def follow() -> None:
                async for _ in event_stream(app, sid, 0, True, _connected, lambda: stopping[0], heads):
                    opened[0] += 1

            streams = [asyncio.ensure_future(follow()) for _ in range(STREAMS)]
            await _waited(lambda: opened[0] >= STREAMS, "the streams did not start")
            await asyncio.sleep(0.3)
            asked_to_stop = time.monotonic()
            stopping[0] = True
            await asyncio.wait_for(asyncio.gather(*streams), 60)
            took = time.monotonic() - asked_to_stop
            gate.touch()
            await running
            return took

    # Woken by the shared look (every STREAM_POLL_S), not at their own next check on the client (CLIENT_CHECK_S).
    assert asyncio.run(scenario()) < 0.9
