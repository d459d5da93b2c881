"""progress_of keeps running sums of a turn's finished steps: they must equal a fresh count at
every point of a turn, including the last step's tool results arriving after it was recorded,
and for an older version of a turn it has already counted further."""

from __future__ import annotations

from types import SimpleNamespace
from uuid import uuid4

from chronicle.runtime.progress import progress_of


def _step(n: int, tools: int) -> dict:
    content = [{"type": "text", "text": "x"}] + [{"type": "tool_use", "id": f"t{n}{i}", "name": "f", "input": {}} for i in range(tools)]
    usage = {"input_tokens": 10 * n, "cache_read_input_tokens": n, "output_tokens": n}
    return {"step": n, "response": {"content": content, "usage": usage}, "results": None}


def _naive(steps: list[dict]) -> tuple[int, int, int]:
    tin = sum(s["response"]["usage"]["input_tokens"] + s["response"]["usage"]["cache_read_input_tokens"] for s in steps)
    tout = sum(s["response"]["usage"]["output_tokens"] for s in steps)
    tools = sum(sum(b["type"] == "tool_use" for b in s["response"]["content"]) for s in steps if s["results"] is not None)
    return tin, tout, tools


def _turn(turn_id, steps):
    return SimpleNamespace(id=turn_id, steps=steps, number=1, status="running", model_calls=len(steps))


def _ran(call_id) -> str:
    return "completed"


def _seen(turn) -> tuple[int, int, int]:
    p = progress_of(turn, status_of=_ran)
    return p["input_tokens"], p["output_tokens"], p["tools_run"]


def test_running_sums_equal_a_fresh_count_as_the_turn_grows_and_for_an_older_version():
    turn_id, steps = uuid4(), []
    for n in range(1, 30):
        steps.append(_step(n, n % 3))
        assert _seen(_turn(turn_id, steps)) == _naive(steps)  # last step's results not yet in
        steps[-1]["results"] = [{"type": "tool_result"}] * (n % 3)
        assert _seen(_turn(turn_id, steps)) == _naive(steps)
    older = [dict(s) for s in steps[:5]]
    assert _seen(_turn(turn_id, older)) == _naive(older)
    assert _seen(_turn(turn_id, steps)) == _naive(steps)
    assert _seen(_turn(turn_id, [])) == (0, 0, 0)
