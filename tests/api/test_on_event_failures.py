"""A program's `run(on_event=...)` callback that raises: the turn goes on and its log is whole (a metrics callback's bug
must not fail the agent's work), and the failure is said rather than dropped: a ChronicleWarning at the callback's
own line and a note on the result, the first time only; each traceback at DEBUG on the `chronicle` logger. A subscriber
the runtime itself gives (a CLI renderer) is said on the `chronicle` logger's warning instead."""

from __future__ import annotations

import asyncio
import logging
import warnings

from chronicle import Agent, Chronicle, ChronicleWarning
from chronicle.runtime.live import Broker, TurnStart
from tests.helpers import response, text, tool_use, write_script


def test_a_raising_callback_is_said_once_and_the_turn_and_its_log_go_on(db_url, workspace, tmp_path, caplog):
    script = write_script(tmp_path / "s.json", [response(tool_use("r1", "read_file", path="hello.txt")), response(text("done"))])
    agent = Agent(tools=["read_file"], provider=f"scripted:{script}")
    seen: list[str] = []

    def counting(event):  # fails on every tool event: said once, still called for every event
        seen.append(event.type)
        if event.type.startswith("tool_"):
            raise ValueError(f"bug in my callback at {event.type}")

    caplog.set_level(logging.DEBUG, logger="chronicle")
    with Chronicle(db_url) as app, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = asyncio.run(app.run(agent, "read it", workspace=workspace, on_event=counting))
        assert done.status == "completed" and done.text == "done", done.reason
        said = [w for w in caught if issubclass(w.category, ChronicleWarning)]
        assert len(said) == 1, [str(w.message) for w in said]
        line = str(said[0].message)
        assert "counting raised ValueError: bug in my callback at tool_start on a tool_start event" in line, line
        assert said[0].filename == __file__  # attributed to the line that raised, in the callback
        assert [n for n in done.notes if "counting raised" in n] == [line]
        assert seen.count("tool_start") == 1 and seen.count("tool_end") == 1 and "turn_end" in seen  # called on
        kinds = [(r["kind"], r["status"]) for r in app.audit(session=done.session_id)]
        assert ("tool_call", "completed") in kinds and kinds[-1] == ("turn_end", "completed"), kinds
    tracebacks = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "raised on a tool_" in r.getMessage()]
    assert len(tracebacks) == 2 and all("Traceback" in t and "ValueError" in t for t in tracebacks), tracebacks


def test_a_subscriber_the_runtime_gives_is_said_on_the_chronicle_logger(caplog):
    broker = Broker()
    calls: list[str] = []

    async def renderer(event):
        calls.append(event.type)
        raise RuntimeError("renderer broke")

    broker.subscribe(renderer)
    broker.subscribe(lambda event: calls.append("after"))  # the next subscriber still gets the event
    event = TurnStart(session_id="s", turn_id="t", number=1, input="hi")
    caplog.set_level(logging.WARNING, logger="chronicle")
    asyncio.run(broker.emit(event))
    asyncio.run(broker.emit(event))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert calls == ["turn_start", "after", "turn_start", "after"]
    assert len(warned) == 1 and "renderer raised RuntimeError: renderer broke on a turn_start event at " in warned[0], warned
