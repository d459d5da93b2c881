"""`stream(...).result`: how the streamed run ended, as `run` returns it, once the `async for` has ended."""

from __future__ import annotations

import asyncio
import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import response, text, tool_use


def _provider(tmp_path, *responses) -> str:  # type: ignore[no-untyped-def]
    (tmp_path / "s.json").write_text(json.dumps({"agents": {"main": list(responses)}}), encoding="utf-8")
    return f"scripted:{tmp_path / 's.json'}"


def test_a_stream_read_to_its_end_has_the_runs_result_and_not_before(db_url, workspace, tmp_path):
    provider = _provider(tmp_path, response(tool_use("tu_1", "list_dir", path=".")), response(text("Two files.")))

    async def main() -> None:
        async with Chronicle(db_url) as app:
            events = app.stream(Agent(tools=["list_dir"], provider=provider), "what is here?", workspace=workspace)
            with pytest.raises(ChronicleError, match="once its `async for` has ended") as early:
                events.result  # noqa: B018 - nothing has run yet
            assert early.value.code == 2
            seen = [event async for event in events]
            result = events.result
            assert (result.status, result.text, result.exit_code) == ("completed", "Two files.", 0)
            ended = [e for e in seen if e.type == "turn_end"]
            assert ended and result.session_id == ended[-1].session_id
            assert [r["session_id"] for r in app.sessions()] == [result.session_id]

    asyncio.run(main())


def test_a_stream_let_go_of_has_no_result_and_says_why(sqlite_url, workspace, tmp_path):
    provider = _provider(tmp_path, response(tool_use("tu_1", "list_dir", path=".")), response(text("never read")))

    async def main() -> None:
        async with Chronicle(sqlite_url) as app:
            events = app.stream(Agent(tools=["list_dir"], provider=provider), "go", workspace=workspace)
            async for _ in events:
                break
            await events.aclose()
            with pytest.raises(ChronicleError, match="let go of before its end"):
                events.result  # noqa: B018

    asyncio.run(main())
