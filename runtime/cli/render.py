"""Renderers subscribe to live events: human (rich) for people, JSON lines for machines."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

#: What a terminal would act on instead of showing: C0/C1 controls (ESC starts OSC 52 clipboard
#: writes, hidden text, title changes; CR overwrites a line) and the bidi overrides that reorder it.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text from the model or a tool, safe to print: every control character shown as \\xNN, not obeyed.

    Newlines and tabs stay. Every human renderer (run, chat, history, log, audit, tables) uses this."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """Every console the CLI prints with: each string it renders (a line, a table cell, a rule's title) goes through
    `printable` first, so a name, title, path or reason that a model or a tool chose (a tool named
    `evil\\x1b]0;PWN\\x07`) cannot drive the terminal, whichever call site forgot to clean it. Markup is untouched:
    it holds no control character, and `printable` adds none (nor a backslash before a `[`)."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return super().render_str(printable(text), *args, **kwargs)

    def on_broken_pipe(self) -> None:
        """Nobody reads this console any more (`| head -1`): rich raised SystemExit(1) from whatever printed, in
        the middle of a turn too. cli/pipes.py decides instead: write to /dev/null and go on, or exit quietly."""
        from .pipes import reader_gone

        self.quiet = True
        reader_gone(self.file)


def ascii_json(stream: Any = None) -> bool:
    """Whether JSON written to `stream` (stdout) must escape every character outside ASCII (`ensure_ascii`): when the
    stream's encoding is not UTF-8 (`PYTHONIOENCODING=latin-1`, LC_ALL=C without UTF-8 mode), where cli/entry.py makes
    what it cannot encode `\\u2026`, `\\xe9` or `\\U0001f600`, of which JSON reads only the first."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    return encoding.lower().replace("-", "").replace("_", "") not in ("utf8", "utf8sig")


def short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = printable(text.replace("\n", " ⏎ "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def whole_input(value: Any) -> str:
    """A tool call's input in full, for a person deciding whether to run it: never cut, wrapped by
    the terminal, every character visible (a command cut at 120 characters hid `…; touch PAYLOAD`)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    return printable(text)


#: A table's money cell for a figure with no known price (the JSON's null), explained once under the table.
UNPRICED = "?"


def usd(value: float | None) -> str:
    """A table's money cell, one precision for every row: `$0.0123`; a cost under $0.0001 that is not nothing
    `<$0.0001` (not `$0.0000`, which reads as free); None, a figure with a call of no known price, UNPRICED."""
    if value is None:
        return UNPRICED
    if 0 < value < 0.00005:
        return "<$0.0001"
    return f"${value:,.4f}"


def unpriced_note(in_json: str, by_model: bool = False) -> str:
    """The footnote a table with an UNPRICED cell prints once; `in_json`: what its `--json` says instead."""
    which = "the model column names the models" if by_model else "`chronicle cost --by model` names the models"
    return (f"{UNPRICED}: no USD figure, since some of that row's model calls have no known price (--json: {in_json}); "
            f"{which}, and CHRONICLE_PRICES can price them (docs/operations.md#cost)")


class JsonLinesRenderer:
    def __init__(self, stream: Any = None) -> None:
        from chronicle.runtime.live import LIVE_EVENTS  # not at import: tables and `printable` need no pydantic models

        self.stream = stream or sys.stdout
        self.events = LIVE_EVENTS

    def __call__(self, event: Any) -> None:
        try:
            line = self.events.dump_json(event).decode()
            if ascii_json(self.stream):
                line = json.dumps(json.loads(line), ensure_ascii=True, separators=(",", ":"))
            self.stream.write(line + "\n")
            self.stream.flush()
        except BrokenPipeError:  # the reader went away: the turn goes on (cli/pipes.py)
            from .pipes import reader_gone

            reader_gone(self.stream)


def retry_when(next_attempt_at: str | None) -> str:
    """'in 2.1 s' from the event's timestamp, as a person reads a countdown."""
    if not next_attempt_at:
        return "now"
    from datetime import datetime, timezone

    seconds = (datetime.fromisoformat(next_attempt_at) - datetime.now(timezone.utc)).total_seconds()
    return f"in {max(seconds, 0):.1f} s"


class HumanRenderer:
    """Streams text as it arrives and shows each tool call as it runs.

    Sub-agents run concurrently, so their streamed text would interleave into nonsense: for
    them only tool calls and start/end lines are shown, indented and named; `log --tree` has the rest.
    An error that ends the top-level turn is not shown: the command reports the outcome once.
    """

    def __init__(self, console: Console | None = None, show_thinking: bool = False, name_inputs: bool = False) -> None:
        self.console = console or SafeConsole(highlight=False, emoji=False)
        #: Name the input each turn answers (`resume`: the inputs it runs are none the person typed just now).
        self.name_inputs = name_inputs
        self.show_thinking = show_thinking
        self._in_text = False
        self._children: dict[str, str] = {}
        self._started: set[str] = set()
        #: The text streamed since the last tool call: the final answer as the model wrote it.
        self._streamed = ""
        #: The input this command recorded: a turn that answers another (queued before it, or while it ran)
        #: is named, or its answer would read as a second answer to the person's own prompt.
        self.own_input: str | None = None
        self._named_other = False
        self._own_started = False

    def _who(self, event: Any) -> str:
        label = self._children.get(event.session_id)
        return f"  [magenta]{escape(label)}[/] " if label else ""

    def _end_text(self) -> None:
        if self._in_text:
            self.console.print()
            self._in_text = False

    def answering(self, input_id: str | None) -> None:
        """The input the person just gave: the turns that answer others are named from now on."""
        self.own_input, self._named_other, self._own_started = input_id, False, False

    def _name_input(self, event: Any) -> None:
        """Another input's turn is named (one queued before the person's, or a turn a dead process left, runs first;
        one queued meanwhile runs after); then so is the person's own, once another came before it."""
        text = escape(short(printable(event.input), 100))
        if event.input_id == self.own_input:
            self._own_started = True
            if self._named_other:
                self._end_text()
                self.console.print(f"[dim]↳ your input: {text}[/]")
            return
        self._end_text()
        self.console.print(f"[dim]↳ {'a later' if self._own_started else 'an earlier'} input: {text}[/]")
        self._named_other = True

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "agent_start" and event.parent_session_id:
            self._children[event.session_id] = f"{'  ' * (event.depth - 1)}[{getattr(event, 'prefix', '')} {_shown(event)}]"
        if event.session_id in self._children and kind in ("message_update", "turn_end"):
            return
        if kind == "message_update":
            delta = event.delta
            if delta.get("type") == "text":
                self.console.print(escape(printable(delta.get("text", ""))), end="", soft_wrap=True)
                self._in_text = True
                self._streamed += delta.get("text", "")
            elif delta.get("type") == "thinking" and self.show_thinking:
                self.console.print(f"[dim italic]{escape(printable(delta.get('thinking', '')))}[/]", end="")
        elif kind in ("tool_start", "tool_end", "turn_start"):  # a tool skipped by steering or a guard has no start
            self._streamed = ""
        if kind == "turn_start" and event.session_id not in self._children:
            if self.own_input is not None and event.input_id:
                self._name_input(event)
            elif self.name_inputs:
                self._end_text()
                self.console.print(f"[dim]↳ input: {escape(short(printable(event.input), 100))}[/]")
        if kind == "tool_start":
            self._end_text()
            self._started.add(event.tool_call_id)
            self.console.print(f"{self._who(event)}[cyan]⚙ {escape(short(event.name))}[/] [dim]{escape(short(event.input))}[/]")
        elif kind == "tool_update":
            self._end_text()
            self.console.print(f"{self._who(event)}  [dim]│ {escape(short(event.detail, 120))}[/]")
        elif kind == "tool_end":
            self._end_text()
            if event.tool_call_id not in self._started:  # refused before it ran: unknown tool, bad arguments
                self.console.print(f"{self._who(event)}[cyan]⚙ {escape(event.name)}[/] [dim](not run)[/]")
            mark = "[red]✗[/]" if event.is_error else "[green]✓[/]"
            took = f" [dim]{event.duration_ms:.0f} ms[/]" if event.duration_ms is not None else ""
            output = escape(short(event.output, 100))
            self.console.print(f"{self._who(event)}  {mark} {escape(event.name)} [dim]{event.status}[/]{took}  [dim]{output}[/]")
        elif kind == "status_change" and event.status == "retry":
            if self._in_text:
                self.console.print(" [dim](this attempt failed; its text is discarded)[/]")
                self._in_text = False
            self._streamed = ""
            reason = escape(printable(event.reason or "model call failed"))
            self.console.print(f"[yellow]↻ {reason}; attempt {event.attempt} {retry_when(event.next_attempt_at)}[/]")
        elif kind == "approval_needed":
            self._end_text()
            self.console.print(f"[yellow]? {escape(short(event.name))} needs approval[/]")
            self.console.print(escape(whole_input(event.input)), style="dim")
        elif kind == "error":
            self._end_text()
            if event.session_id not in self._children and event.kind != "compaction":
                return  # ends the turn: the command reports it once, with the session id (run_cmd.report)
            self.console.print(f"{self._who(event)}[red]error:[/] {escape(printable(event.message))}")
        elif kind == "agent_start" and event.parent_session_id:
            self._end_text()
            self.console.print(f"{self._who(event)}[magenta]↳ sub-agent {escape(getattr(event, 'prefix', ''))} {escape(_shown(event))} "
                               f"started[/] [dim]{event.session_id}[/]")
        elif kind == "agent_end" and event.parent_session_id:
            self._end_text()
            reason = f" [dim]{escape(short(event.reason, 100))}[/]" if event.reason else ""
            self.console.print(f"{self._who(event)}[magenta]↳ sub-agent {escape(_shown(event))} {event.status}[/]{reason}")
        elif kind == "turn_end":
            self._end_text()
            if event.status == "completed" and event.text is not None and event.text.strip() != self._streamed.strip():
                # The answer changed after it streamed: show what the turn delivers, and say what changed it.
                cut = redacted_since_streamed(self._streamed, event.text)
                said = (f"the secret scan redacted {cut} value{'s' if cut != 1 else ''} in the answer" if cut
                        else "a guardrail changed the answer")
                self.console.print(f"[yellow]{said}; delivered:[/]")
                self.console.print(escape(printable(event.text)), soft_wrap=True)


def redacted_since_streamed(streamed: str, delivered: str) -> int:
    """How many values the secret scan cut from the answer, when that is all that changed it since it streamed
    (each `[REDACTED:kind]` stands where the streamed text had something); 0 when anything else changed it
    (a final guardrail), or both did. The scan runs on every answer, guardrails or none."""
    from chronicle.runtime.secret_scan import MARKER_RE

    markers = len(MARKER_RE.findall(delivered)) - len(MARKER_RE.findall(streamed))
    if not 0 < markers <= 64:  # more: not worth a costly match, and the general line is still true enough
        return 0
    pattern = r"[\s\S]+?".join(re.escape(part) for part in MARKER_RE.split(delivered.strip()))
    return markers if re.fullmatch(pattern, streamed.strip()) else 0


def _shown(event: Any) -> str:
    """A sub-agent as people read it: its instance name (seed 004), else its agent's name."""
    return getattr(event, "instance", None) or event.agent
