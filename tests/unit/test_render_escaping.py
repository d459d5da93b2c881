"""The approval prompt shows a person the whole input, with every character visible (issue 17)."""

from __future__ import annotations

import io

from rich.console import Console

from chronicle.runtime.cli.chat_cmd import ChatRenderer
from chronicle.runtime.cli.render import HumanRenderer, printable
from chronicle.runtime.live import ApprovalNeeded

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
