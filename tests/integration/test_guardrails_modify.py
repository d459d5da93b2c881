"""Guardrails that change what passes, in the real loop on both backends: the model reads the changed
input, the turn delivers the changed answer and later turns read it, and every change or open failure
is a Turn.GuardrailApplied event, never a silent gap."""

from __future__ import annotations

import hashlib

from chronicle.runtime.guardrails import Guardrail, GuardrailHook, Rejected
from chronicle.runtime.hooks import Hooks
from tests.helpers import response, text

from .loop_harness import Harness


def pseudonymise(text: str, where: str) -> str | None:
    return text.replace("Alexandra", "A.") if "Alexandra" in text else None


def broken(text: str, where: str) -> None:
    raise RuntimeError("bug in the check")


def no_shouting(text: str, where: str) -> None:
    if text.isupper():
        raise Rejected("no shouting")


def harness(db_url, workspace, tmp_path, main, *guardrails: Guardrail) -> Harness:
    h = Harness(db_url, workspace, tmp_path, main)
    h.loop.hooks = Hooks([GuardrailHook(list(guardrails))])
    return h


def marks(h: Harness) -> list[dict]:
    return [m for t in h.store.head_turns(h.store.session(h.session_id)) for m in t.guardrails_applied]


def user_text(message) -> str:
    return "".join(getattr(b, "text", "") for b in message.content)


def test_the_model_reads_the_input_as_the_check_changed_it_and_the_input_stays_recorded(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [[response(text("Hello A."))], [response(text("Done."))]],
                Guardrail("names", pseudonymise, on=["inbound"]))
    assert h.run("greet Alexandra").status == "completed"
    assert user_text(h.provider.requests[0].messages[-1]) == "greet A."
    [turn] = h.store.head_turns(h.store.session(h.session_id))
    assert turn.input_text == "greet Alexandra" and turn.model_input == "greet A."
    [mark] = marks(h)
    assert mark == {"guardrail": "names", "where": "inbound", "action": "modified",
                    "before_sha256": hashlib.sha256(b"greet Alexandra").hexdigest(), "before_chars": 15,
                    "after_sha256": hashlib.sha256(b"greet A.").hexdigest(), "after_chars": 8}
    h.run("thanks")
    assert "Alexandra" not in str([m.wire() for m in h.provider.requests[1].messages]), "later turns read the changed input too"


def test_the_turn_delivers_the_answer_as_the_check_changed_it_and_the_next_turn_reads_that(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [[response(text("Alexandra called."))], [response(text("ok"))]],
                Guardrail("names", pseudonymise, on=["final"]))
    outcome = h.run("who called?")
    assert (outcome.status, outcome.text) == ("completed", "A. called.")
    [turn] = h.store.head_turns(h.store.session(h.session_id))
    assert turn.final_text == "A. called." and turn.last_response.text == "Alexandra called.", "the response stays verbatim"
    h.run("and then?")
    assistant = [m for m in h.provider.requests[1].messages if m.role == "assistant"]
    assert [user_text(m) for m in assistant] == ["A. called."]


def test_a_check_that_fails_open_is_recorded_and_passes_the_text_unchanged(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [response(text("fine"))], Guardrail("flaky", broken, on=["inbound", "final"], fail="open"))
    outcome = h.run("hello")
    assert (outcome.status, outcome.text) == ("completed", "fine")
    assert [(m["where"], m["action"], m["error"]) for m in marks(h)] == [
        ("inbound", "error", "the check raised RuntimeError: bug in the check"),
        ("final", "error", "the check raised RuntimeError: bug in the check"),
    ]


def test_a_check_that_fails_closed_on_the_final_answer_fails_the_turn_with_its_message(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [response(text("fine"))], Guardrail("flaky", broken, on=["final"]))
    outcome = h.run("hello")
    assert outcome.status == "failed"
    assert outcome.reason == "guardrail flaky rejected the final answer: the check raised RuntimeError: bug in the check"


def test_checks_run_in_order_each_on_what_the_previous_left_and_each_change_is_its_own_event(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [response(text("Alexandra, hi"))],
                Guardrail("names", pseudonymise, on=["final"]), Guardrail("upper", lambda t, w: t.upper(), on=["final"]))
    assert h.run("greet").text == "A., HI"
    assert [(m["guardrail"], m["before_chars"], m["after_chars"]) for m in marks(h)] == [("names", 13, 6), ("upper", 6, 6)]


def test_a_rejected_final_answer_fails_the_turn_with_the_message_of_the_check_that_rejected_it(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [response(text("ALEXANDRA!"))],
                Guardrail("names", pseudonymise, on=["final"]), Guardrail("calm", no_shouting, on=["final"]))
    outcome = h.run("shout")
    assert outcome.status == "failed" and outcome.reason == "guardrail calm rejected the final answer: no shouting"
    assert [(m["guardrail"], m["action"]) for m in marks(h)] == []  # "ALEXANDRA!" has no "Alexandra": names passed it


def test_a_rejected_input_after_a_change_stops_the_turn_before_any_model_call(db_url, workspace, tmp_path):
    h = harness(db_url, workspace, tmp_path, [response(text("never"))],
                Guardrail("names", pseudonymise, on=["inbound"]), Guardrail("calm", no_shouting, on=["inbound"]))
    outcome = h.run("CALL ALEXANDRA NOW, Alexandra")
    assert outcome.status == "stopped" and "rejected the input: no shouting" in (outcome.reason or "")
    assert h.provider.requests == []
    assert [(m["guardrail"], m["where"]) for m in marks(h)] == [("names", "inbound")]
