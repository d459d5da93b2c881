"""A scripted response held until a file exists (`until_file`): tests and demos decide when the model
answers, where a fixed `delay_s` raced a loaded machine (a browser that took longer to open than the
delay missed the moment it was meant to watch)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chronicle.runtime.providers import scripted
from chronicle.runtime.providers.base import ModelRequest
from chronicle.runtime.providers.scripted import ScriptedProvider, ScriptError
from tests.helpers import response, text, write_script


def _request() -> ModelRequest:
    return ModelRequest(model="scripted", system="", messages=[], tools=[], max_tokens=100, agent="main", turn_number=1, call_index=0)


async def _ignore(_: object) -> None:
    return None


def test_a_response_waits_for_its_file_then_answers(tmp_path: Path) -> None:
    provider = ScriptedProvider(write_script(tmp_path / "s.json", [response(text("now"), until_file="go")]))

    async def scenario() -> str:
        answer = asyncio.ensure_future(provider.stream(_request(), _ignore))
        await asyncio.sleep(0.3)
        assert not answer.done(), "answered before its file existed"
        (tmp_path / "go").write_text("", encoding="utf-8")  # relative to the script's folder
        done = await asyncio.wait_for(answer, 10)
        return done.text

    assert asyncio.run(scenario()) == "now"


def test_an_absolute_gate_path_is_taken_as_it_is(tmp_path: Path) -> None:
    gate = tmp_path / "elsewhere" / "open"
    gate.parent.mkdir()
    gate.write_text("", encoding="utf-8")
    provider = ScriptedProvider(write_script(tmp_path / "s.json", [response(text("at once"), until_file=str(gate))]))
    assert asyncio.run(asyncio.wait_for(provider.stream(_request(), _ignore), 10)).text == "at once"


def test_a_file_that_never_appears_fails_the_call_saying_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripted, "UNTIL_FILE_MAX_S", 0.2)
    provider = ScriptedProvider(write_script(tmp_path / "s.json", [response(text("never"), until_file="missing")]))
    answer = asyncio.run(provider.stream(_request(), _ignore))
    assert answer.stop_reason == "error" and answer.error is not None
    assert answer.error.kind == "script_gate" and not answer.error.retryable
    assert "until_file missing did not appear" in answer.error.message and str(tmp_path / "s.json") in answer.error.message


def test_a_misspelt_gate_key_is_refused_when_the_script_loads(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="until_fil"):
        ScriptedProvider(write_script(tmp_path / "s.json", [response(text("x"), until_fil="go")]))
