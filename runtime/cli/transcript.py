"""`history --format md|html`: the conversation as a document a person reads or hands on.

HTML escapes every piece of recorded text: model output and tool results are untrusted input,
and a transcript opened in a browser must not run what an agent printed. Both forms show every
control character as `\\x1b` (render.py `printable`), whether they go to a terminal, a pipe or a file,
as every human form does: a transcript `cat`-ed later would drive the terminal that shows it (a
title change, a cleared screen, a clipboard write), and such characters are never valid HTML text.
`history --json` has the text exactly as recorded.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Sequence

from .render import printable


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return json.dumps(content, ensure_ascii=False)


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def markdown(session_id: str, title: str | None, messages: Sequence[Any], labels: dict[int, str] | None = None) -> str:
    """`labels`: message index -> who sent a channel's input ("from alice via signal")."""
    lines = [f"# {title or 'Session'}", "", f"Session `{session_id}`", ""]
    for index, message in enumerate(messages):
        said = (labels or {}).get(index)
        lines += [f"## {message.role}" + (f" · {said}" if said else ""), ""]
        for block in message.content:
            if block.type == "text":
                lines += [block.text, ""]
            elif block.type == "thinking":
                lines += ["> *thinking:* " + block.thinking.replace("\n", "\n> "), ""]
            elif block.type == "tool_use":
                lines += [f"**tool call** `{block.name}` ({block.id})", "", _fence(json.dumps(block.input, indent=2, ensure_ascii=False), "json"), ""]
            elif block.type == "tool_result":
                mark = "error" if block.is_error else "result"
                lines += [f"**tool {mark}** ({block.tool_use_id})", "", _fence(_text_of(block.content)), ""]
            else:
                lines += [f"*[{block.type}]*", ""]
    return printable("\n".join(lines).rstrip()) + "\n"  # the whole document: title, names, text, results


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;line-height:1.5}"
    "section{border-left:4px solid #ccc;padding:.2rem 1rem;margin:1rem 0}section.user{border-color:#2a7}"
    "section.assistant{border-color:#27a}pre{background:#f5f5f5;padding:.5rem;white-space:pre-wrap}"
    ".error{color:#b00}.thinking{color:#666;font-style:italic}"
)


def html(session_id: str, title: str | None, messages: Sequence[Any], labels: dict[int, str] | None = None) -> str:
    heading = escape(title or "Session")
    parts = [f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{heading}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{heading}</h1><p>Session <code>{escape(session_id)}</code></p>"]
    for index, message in enumerate(messages):
        role = escape(message.role)
        said = (labels or {}).get(index)
        parts.append(f"<section class=\"{role}\"><h2>{role}{f' · {escape(said)}' if said else ''}</h2>")
        for block in message.content:
            if block.type == "text":
                parts.append(f"<p>{escape(block.text).replace(chr(10), '<br>')}</p>")
            elif block.type == "thinking":
                parts.append(f"<p class=\"thinking\">{escape(block.thinking)}</p>")
            elif block.type == "tool_use":
                args = escape(json.dumps(block.input, indent=2, ensure_ascii=False))
                parts.append(f"<p>tool call <code>{escape(block.name)}</code> ({escape(block.id)})</p><pre>{args}</pre>")
            elif block.type == "tool_result":
                css = " class=\"error\"" if block.is_error else ""
                parts.append(f"<p{css}>tool {'error' if block.is_error else 'result'} ({escape(block.tool_use_id)})</p>"
                             f"<pre>{escape(_text_of(block.content))}</pre>")
            else:
                parts.append(f"<p><em>[{escape(block.type)}]</em></p>")
        parts.append("</section>")
    parts.append("</body></html>")
    return printable("\n".join(parts)) + "\n"  # after escaping: `\\x1b` holds nothing HTML reads
