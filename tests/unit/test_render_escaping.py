"""The approval prompt shows a person the whole input, with every character visible (issue 17)."""

from __future__ import annotations

import io

from rich.console import Console

from chronicle.runtime.cli.chat_cmd import ChatRenderer
from chronicle.runtime.cli.render import HumanRenderer, printable
from chronicle.runtime.live import AgentEnd, AgentStart, ApprovalNeeded, MessageUpdate, ToolEnd, TurnEnd, TurnStart

COMMAND = "echo " + "harmless " * 30 + "; touch PAYLOAD \x1b]0;title\x07"


def shown(renderer_class: type[HumanRenderer]) -> str:
    out = io.StringIO()
    renderer = renderer_class(Console(file=out, width=50, force_terminal=False))
    renderer(ApprovalNeeded(session_id="s", turn_id="t", tool_call_id="c", name="bash", input={"command": COMMAND}))
    return out.getvalue()


def test_chat_and_run_approval_prompts_show_the_whole_command_wrapped():
    for renderer_class in (ChatRenderer, HumanRenderer):
        text = shown(renderer_class)
        assert "touch PAYLOAD" in text
        assert text.count("harmless") == 30  # nothing cut, however narrow the terminal
        assert "\x1b" not in text and "\\u001b]0;title\\u0007" in text.replace("\n", "")


def test_printable_keeps_lines_and_tabs_and_shows_every_control():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("x\ry\x9b\u202e") == "x\\x0dy\\x9b\\u202e"


def test_names_the_model_or_a_config_chose_are_printed_as_written_never_read_as_markup():
    """A tool name is the model's to write (an unknown tool is still reported) and an agent's name is
    the config's: `[/]` read as markup stopped the renderer with a MarkupError, `[red]` vanished."""
    out = io.StringIO()
    renderer = HumanRenderer(Console(file=out, width=200, force_terminal=False))
    renderer(AgentStart(session_id="child", agent="[red]helper", parent_session_id="parent", depth=1))
    renderer(ToolEnd(session_id="s", tool_call_id="c", tool_use_id="u", name="look[/]up", status="failed",
                     output="unknown tool", is_error=True))
    renderer(AgentEnd(session_id="child", agent="[red]helper", status="completed", parent_session_id="parent", depth=1))
    text = out.getvalue()
    assert text.count("look[/]up") == 2  # "(not run)" and its result line
    assert "sub-agent 🤖 [red]helper started" in text and "sub-agent [red]helper completed" in text


def test_history_shows_a_tool_use_and_its_result_with_the_names_and_ids_the_model_wrote():
    from types import SimpleNamespace

    from chronicle.runtime.cli.inspect_cmd import render_block

    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    console.print(render_block(SimpleNamespace(type="tool_use", name="[bold]grep", id="toolu_[/]1", input={"q": "[x]"})))
    console.print(render_block(SimpleNamespace(type="tool_result", tool_use_id="toolu_[/]1", content="[red]no", is_error=True)))
    console.print(render_block(SimpleNamespace(type="[new]")))
    text = out.getvalue()
    assert "⚙ [bold]grep" in text and text.count("(toolu_[/]1)") == 2 and "[red]no" in text and "[new]" in text


def test_text_before_a_tool_that_never_started_is_not_taken_for_a_changed_answer():
    """A tool skipped by steering ends without starting: the text before it is not part of the answer,
    and the answer that streamed after it is not reported as changed by a guardrail."""
    for renderer_class in (ChatRenderer, HumanRenderer):
        out = io.StringIO()
        renderer = renderer_class(Console(file=out, width=80, force_terminal=False))
        renderer(TurnStart(session_id="s", turn_id="t", number=1, input="hi"))
        renderer(MessageUpdate(session_id="s", turn_id="t", step=0, delta={"type": "text", "text": "Let me look."}))
        renderer(ToolEnd(session_id="s", tool_call_id="c", tool_use_id="tu", name="read_file", status="skipped",
                         output="skipped: the user sent a steering message", is_error=True))
        renderer(MessageUpdate(session_id="s", turn_id="t", step=1, delta={"type": "text", "text": "Brief answer."}))
        renderer(TurnEnd(session_id="s", turn_id="t", status="completed", text="Brief answer."))
        assert "guardrail" not in out.getvalue() and out.getvalue().count("Brief answer.") == 1


def test_the_answer_is_called_redacted_only_when_the_scans_markers_are_all_that_changed_it():
    from chronicle.runtime.cli.render import redacted_since_streamed

    streamed = "key AKIA" + "QX7RZ2MPL4KD9WNT and pass: hunter2hunter2."
    assert redacted_since_streamed(streamed, "key [REDACTED:aws-access-key] and pass: [REDACTED:assigned-secret].") == 2
    assert redacted_since_streamed(streamed, "key [REDACTED:aws-access-key] and no password.") == 0  # a guardrail too
    assert redacted_since_streamed("Alexandra is here.", "Alex is here.") == 0  # a guardrail alone
