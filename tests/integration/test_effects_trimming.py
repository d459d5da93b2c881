"""Tool-result trimming: old tool results shortened in what the model reads, whole in the log, on both backends."""

from __future__ import annotations

from chronicle.runtime.agents.registry import AgentRegistry, RegistryError, load_registry
from tests.helpers import response, text, tool_use
from tests.integration.loop_harness import Harness


def test_tool_results_two_turns_old_are_trimmed_in_the_context_and_kept_whole_in_the_log(db_url, workspace, tmp_path):
    (workspace / "big.txt").write_text("x" * 500, encoding="utf-8")
    harness = Harness(db_url, workspace, tmp_path, [
        [response(tool_use("t1", "read_file", path="big.txt")), response(text("read it"))],
        [response(text("second"))],
        [response(text("third"))],
    ], tools=("read_file",))
    harness.spec = harness.spec.model_copy(update={"trim_tool_results_after_turns": 2, "trim_tool_results_to_chars": 40})
    for prompt in ("read", "again", "once more"):
        assert harness.run(prompt).status == "completed"

    def result_in(request) -> str:
        return next(b.content for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result")

    second_turn, third_turn = harness.provider.requests[2], harness.provider.requests[3]
    assert "trimmed" not in result_in(second_turn), "one turn old: still whole"
    trimmed = result_in(third_turn)
    assert trimmed.endswith("the log keeps the whole result]") and "trimmed from" in trimmed and len(trimmed) < 200
    assert harness.results()[0].content == "x" * 500, "the recorded result is whole"


def test_effects_come_from_chronicle_toml_and_a_bad_value_is_a_registry_error(workspace):
    (workspace / "chronicle.toml").write_text("[effects]\ntrim_tool_results_after_turns = 3\n", encoding="utf-8")
    spec = load_registry(workspace / "chronicle.toml").main_spec(provider="p", model="m", workspace=str(workspace))
    assert (spec.trim_tool_results_after_turns, spec.trim_tool_results_to_chars) == (3, 200)
    assert AgentRegistry().main_spec(provider="p", model="m", workspace=str(workspace)).trim_tool_results_after_turns == 0
    (workspace / "chronicle.toml").write_text("[effects]\ntrim_tool_results_after_turns = -1\n", encoding="utf-8")
    try:
        load_registry(workspace / "chronicle.toml")
    except RegistryError as exc:
        assert "trim_tool_results_after_turns must be a whole number" in str(exc)
    else:
        raise AssertionError("a negative value was accepted")
