"""domain/context_wire.py builds the wire messages `build_context` + `Message.wire()` build, handing on
recorded blocks that are already in wire form and validating only the rest. Generated turns mix
both kinds: extra fields, list results, empty text, NaN inputs, cut tool inputs, refusals, unfinished
responses, guardrail answers and inputs, attachments, a compaction summary."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle.domain.context import build_context
from chronicle.domain.context_wire import wire_context
from chronicle.domain.wire_blocks import PARTIAL_INPUT_KEY
from tests.helpers import same_value

TEXTS = st.sampled_from(["", "  ", "hello", "done.", "a\nb", "NaN", "\u00e9t\u00e9"])
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True, allow_infinity=True) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "path"]), inner, max_size=3),
    max_leaves=6,
)
IDS = st.sampled_from(["tu_1", "tu_2", "tu_3"])

TEXT = st.builds(lambda t: {"type": "text", "text": t}, TEXTS)
TEXT_EXTRA = st.builds(lambda t: {"type": "text", "text": t, "citations": None}, TEXTS)
THINKING = st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, TEXTS, TEXTS)
THINKING_SHORT = st.builds(lambda t: {"type": "thinking", "thinking": t}, TEXTS)  # signature filled in
TOOL_USE = st.builds(lambda i, n, x: {"type": "tool_use", "id": i, "name": n, "input": x},
                     IDS, st.sampled_from(["read_file", "bash"]), st.dictionaries(st.sampled_from(["path", "n"]), JSONISH, max_size=2))
TOOL_USE_REORDERED = st.builds(lambda i: {"type": "tool_use", "name": "bash", "id": i, "input": {}}, IDS)
TOOL_USE_CUT = st.builds(lambda i: {"type": "tool_use", "id": i, "name": "bash", "input": {}, PARTIAL_INPUT_KEY: '{"cmd'}, IDS)
OTHER = st.just({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}})
RESPONSE_BLOCK = TEXT | TEXT_EXTRA | THINKING | THINKING_SHORT | TOOL_USE | TOOL_USE_REORDERED | TOOL_USE_CUT | OTHER
RESULT = (
    st.builds(lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e}, IDS, TEXTS, st.booleans())
    | st.builds(lambda i, c: {"type": "tool_result", "tool_use_id": i, "content": c}, IDS, TEXTS)  # is_error filled in
    | st.builds(lambda i, c: {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": c}], "is_error": False},
                IDS, TEXTS)
    | TEXT
)
IMAGE = st.just({"type": "image", "source": {"type": "attachment", "sha256": "ab" * 32, "media_type": "image/png"}})
STOPS = st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal", "error", "aborted", "pause_turn"])
STEP = st.builds(
    lambda content, stop, results: {"response": {"content": content, "stop_reason": stop}, "results": results},
    st.lists(RESPONSE_BLOCK, max_size=4), STOPS, st.none() | st.lists(RESULT, max_size=3),
)
TURN = st.builds(
    lambda text, steps, model_input, answer, attachments: SimpleNamespace(
        input_text=text, steps=steps, model_input=model_input, answer=answer, attachments=attachments),
    TEXTS, st.lists(STEP, max_size=3), st.none() | TEXTS, st.none() | TEXTS, st.sampled_from([(), ()]) | st.lists(IMAGE, max_size=1),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(TURN, max_size=4), st.none() | TEXTS)
def test_the_wire_messages_are_the_models_dumped(turns: list[Any], summary: str | None) -> None:
    expected = [m.wire() for m in build_context(turns, summary=summary)]
    assert same_value(wire_context(turns, summary=summary), expected)


def test_blocks_handed_on_are_copies_of_the_record():
    turn = SimpleNamespace(input_text="hi", answer=None, model_input=None, attachments=(), steps=[
        {"response": {"content": [{"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"cmd": "ls"}}],
                      "stop_reason": "tool_use"},
         "results": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "a", "is_error": False}]},
    ])
    wire = wire_context([turn])
    wire[1]["content"][0]["input"]["cmd"] = "rm -rf /"
    assert turn.steps[0]["response"]["content"][0]["input"] == {"cmd": "ls"}


def test_plain_turns_are_shown_without_importing_pydantic():
    import subprocess

    probe = (
        "import sys\n"
        "from types import SimpleNamespace as T\n"
        "from chronicle.domain.context_wire import wire_context\n"
        "turn = T(input_text='hi', answer=None, model_input=None, attachments=(), steps=[{'response': {'content': "
        "[{'type': 'text', 'text': 'hello'}], 'stop_reason': 'end_turn'}, 'results': []}])\n"
        "print(wire_context([turn]), 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("False") and "'hello'" in done.stdout
