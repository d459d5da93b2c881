"""`history` prints a transcript in one call (cli/inspect_cmd.transcript_lines): the same lines,
styles included, as a rule and a print per message and block gave."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from chronicle.runtime.cli.inspect_cmd import render_block, transcript_lines

MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "look at [red]this[/red] :smile: and 日本語 " * 4}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm [/] \\[x]", "signature": "s"},
        {"type": "text", "text": "I will read it"},
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a[b].txt"}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "line one\nline two ⏎", "is_error": False},
        {"type": "tool_result", "tool_use_id": "t2", "content": "no such file", "is_error": True},
    ]},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
]


def _console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), record=True, force_terminal=True, color_system="truecolor",
                   highlight=False, emoji=False)


def _block_by_block(messages: list[dict[str, Any]], width: int) -> Console:
    """The transcript as it was printed before: a rule per message, a print per block (the reference)."""
    console = _console(width)
    for message in messages:
        colour = "green" if message["role"] == "user" else "cyan"
        console.rule(f"[{colour}]{message['role']}[/]", align="left")
        for block in message["content"]:
            console.print(render_block(SimpleNamespace(**block)), highlight=False)
    return console


def test_one_print_of_the_transcript_shows_what_a_print_per_block_showed():
    for width in (30, 80, 140):
        before = _block_by_block(MESSAGES, width)
        after = _console(width)
        after.print(transcript_lines(MESSAGES))
        shown = after.export_text(styles=True, clear=False)
        assert shown == before.export_text(styles=True), width
        assert "日本語" in shown and ":smile:" in shown and "\x1b[" in shown  # styled, as a terminal shows it


def test_a_long_block_prints_in_pieces_with_the_same_lines():
    """A block is printed as Texts of at most PIECE characters cut at newlines: one 5 MB Text took rich 50 s
    (a `str.partition` per line of what is left). The lines, styles and blank lines are those of one Text."""
    from chronicle.runtime.cli import inspect_cmd

    lines = [f"line {n} [b]not markup[/b] \x1b[31m" + "word " * (n % 40) for n in range(3000)]
    lines[700:703] = ["", "", ""]  # blank lines around a cut
    long = "\n".join(lines) + "\n\nend"
    messages = [{"role": "user", "content": [{"type": "text", "text": long}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": long, "signature": "s"}]}]
    pieces = transcript_lines(messages).renderables
    texts = [p for p in pieces if hasattr(p, "plain")]
    assert len(texts) > 2 * len(long) / inspect_cmd.PIECE and all(len(p.plain) <= inspect_cmd.PIECE for p in texts)
    for width in (40, 120):
        whole = _block_by_block(messages, width)
        cut = _console(width)
        cut.print(transcript_lines(messages))
        shown = cut.export_text(styles=True)
        assert shown == whole.export_text(styles=True), width
        assert "\\x1b[31m" in shown and "[b]not markup[/b]" in shown
