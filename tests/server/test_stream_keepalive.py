"""A quiet session's event stream sends an SSE comment every KEEPALIVE_S: a proxy that closes a connection idle for
60 s (nginx's default proxy_read_timeout) cut a viewer's stream of an idle session, or of a long tool call, and the
page stopped following it. The comment carries no event, so a client reading `data:` lines sees nothing new."""

from __future__ import annotations

import asyncio
import time

from chronicle import Agent, Chronicle
from chronicle.runtime.server.event_stream import KEEPALIVE, KEEPALIVE_S, event_stream
from tests.helpers import response, text, write_script


async def _connected() -> bool:
    return False


def test_an_idle_stream_sends_a_keep_alive_comment_when_nothing_was_sent_for_a_while(tmp_path, workspace):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    assert 10 <= KEEPALIVE_S <= 30, "under the idle timeouts proxies use (30-60 s)"

    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Chronicle(url) as app:
        sid = app.run_sync(Agent(provider=f"scripted:{script}"), "hi", workspace=str(workspace)).session_id
        head = app.log(sid)[-1]["position"]

    async def scenario() -> list[tuple[float, bytes]]:
        with Chronicle(url) as app:
            chunks: list[tuple[float, bytes]] = []
            started = time.monotonic()

            async def follow() -> None:  # as the viewer's page of an idle session follows it: after the head
                async for chunk in event_stream(app, sid, head, True, _connected, lambda: False, keepalive_s=0.4):
                    chunks.append((time.monotonic() - started, chunk))

            task = asyncio.ensure_future(follow())
            await asyncio.sleep(1.5)
            assert not task.done(), "an idle session's stream stays open, waiting for its next turn"
            task.cancel()
            return chunks

    chunks = asyncio.run(scenario())
    beats = [at for at, c in chunks if c == KEEPALIVE]
    assert [c for _, c in chunks if c != KEEPALIVE] == [], "no event: the session is idle"
    assert 2 <= len(beats) <= 4, beats  # one every 0.4 s of silence, not one per look at the head
    assert all(later - earlier >= 0.35 for earlier, later in zip(beats, beats[1:], strict=False)), beats
