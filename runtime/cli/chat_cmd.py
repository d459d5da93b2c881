"""`chronicle chat`: an interactive session in the terminal.

Each message is queued on the session and the loop runs it, streaming text and tool calls as
they happen. Approvals are answered inline; Ctrl-C cancels the running turn (the chat goes on);
slash commands live in chat_slash.py, the line editor in chat_input.py. In a terminal a spinner
shows while the model works and answers are rendered as Markdown as they stream, and a line
typed while a turn runs steers it (`chronicle steer --turn`, from here); through a pipe the
output is the plain text stream `run` prints and each line is the next message, read when the
turn has ended, so scripts and tests read it unchanged.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console, Group
from rich.constrain import Constrain
from rich.markdown import Markdown
from rich.markup import escape
from rich.spinner import Spinner

from .chat_input import LineReader, interactive
from .chat_screen import LiveArea
from .common import DbOption, WorkspaceOption, cli_errors, err_console, fail, missing_store, store_command, utf8_text
from .limits import LimitFlags, limit_options
from .pipes import keep_going
from .render import HumanRenderer, SafeConsole, printable, short, whole_input
from .run_cmd import AgentsOption, MaxIterationsOption, ModelOption, ProviderOption, ToolsOption, from_environment

if TYPE_CHECKING:  # the application layer (the loop, pydantic, the providers) is imported when chat starts, not for --help
    from chronicle.runtime.app.running import Conversation, Driven
    from chronicle.runtime.loop import TurnOutcome

PROMPT = "you> "
#: While a turn runs (in a terminal): a line typed here steers it.
STEER_PROMPT = "steer> "
#: The words an approval question takes (seed 001's, and their one-letter forms).
ANSWERS = {**dict.fromkeys(("y", "yes", "approve", "ok"), "approve"),
           **dict.fromkeys(("n", "no", "deny", "reject", "cancel"), "deny"),
           **dict.fromkeys(("a", "always"), "always")}


class ChatRenderer(HumanRenderer):
    """The run renderer, plus what a person at the keyboard needs to see."""

    def __init__(self, console: Console, show_thinking: bool = False) -> None:
        super().__init__(console, show_thinking)
        #: Spinner and Markdown only on a terminal: a pipe gets the plain stream.
        self.fancy = console.is_terminal
        #: The spinner or the preview: drawn by the steering editor while it is open, by rich otherwise (chat_screen.py).
        self.area = LiveArea(console)
        self._markdown = ""
        #: The top-level turn shown last: the one a line typed while it runs steers.
        self.turn_id: str | None = None

    def _spin(self) -> None:
        if self.fancy and not self.area.active:
            self.area.show(Spinner("dots", text="working…", style="dim"))

    def _stop_live(self) -> None:
        self.area.clear()

    def _end_text(self) -> None:
        if self.fancy:
            self._stop_live()  # the spinner or the preview goes; the answer is printed once, whole
            if self._markdown:
                self.console.print(Markdown(printable(self._markdown), hyperlinks=False))  # a link's target is shown
            self._markdown = ""
            return
        super()._end_text()

    def _stream_markdown(self, text: str) -> None:
        self._markdown += text
        self._streamed += text  # what the turn_end check compares with (a guardrail may change the answer)
        # One column short of the width: a line exactly as wide as the terminal leaves the cursor
        # where the live display cannot count it, and the preview would not be erased cleanly.
        preview = Constrain(Group(Markdown(printable(self._markdown), hyperlinks=False), Spinner("dots", style="dim")),
                            width=max(self.console.width - 1, 20))
        self.area.show(preview, refresh_per_second=8)

    def __call__(self, event: Any) -> None:
        kind = event.type
        top = event.session_id not in self._children
        if kind == "turn_start" and top:
            self.turn_id = event.turn_id
        if self.fancy and top:
            if kind == "message_update" and event.delta.get("type") == "text":
                self._stream_markdown(event.delta.get("text", ""))
                return
            if kind in ("turn_start", "tool_end"):
                super().__call__(event)
                self._spin()  # the model is asked (again): show that something is happening
                return
            if kind in ("turn_end", "error") or (kind == "status_change" and event.status == "retry"):
                self._end_text()
        if kind == "approval_needed":
            self._end_text()
            why = "" if event.reason == "requires approval" else f" ({escape(printable(event.reason))})"
            self.console.print(f"[yellow]? {escape(short(event.name))} needs approval{why}[/]")
            self.console.print(escape(whole_input(event.input)), style="dim")
            return
        if kind == "compaction":
            self._end_text()
            what = f"this turn's first {event.steps_compacted} step(s)" if event.turn_id else f"{event.turns_compacted} turn(s)"
            self.console.print(f"[magenta]⤵ compacted {what} ({event.strategy})[/]")
            return
        super().__call__(event)


class Chat:
    """The terminal side of a Conversation (runtime/app/running.py): prompts, answers, slash commands."""

    def __init__(self, conversation: Conversation, console: Console, renderer: ChatRenderer | None = None) -> None:
        self.conversation = conversation
        self.store = conversation.store
        self.loop = conversation.loop
        self.settings = conversation.settings
        self.console = console
        self.renderer = renderer
        self.reader = LineReader(self.store.url)
        #: The first line from a pipe, read before the session was started (`first_piped_line`).
        self.pending: str | None = None
        #: In a terminal, while a turn runs: the line editor reading steering (stopped for an approval).
        self._steering: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> Any:
        return self.conversation.session_id

    async def approve(self, call: Any) -> str | None:
        """Ask inline. Ctrl-C here cancels the turn; end of input leaves the call awaiting approval."""
        event_loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        steering = self._steering is not None
        await self._stop_steering()  # the editor gives the terminal back to input()
        try:
            event_loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            while True:
                answer = input("  approve? [y]es / [n]o / [a]lways / [w]hy: ").strip().lower()
                if answer in ANSWERS:
                    return ANSWERS[answer]
                if answer in ("w", "why"):
                    self._why(call)
                    continue
                self.console.print("  answer y (yes, approve, ok), n (no, deny, reject, cancel), a (always), "
                                   "or w to see why it was asked for")
        except KeyboardInterrupt:
            self.console.print()
            raise asyncio.CancelledError from None
        except EOFError:
            return None
        finally:
            if task is not None:
                try:
                    event_loop.add_signal_handler(signal.SIGINT, task.cancel)
                except (NotImplementedError, RuntimeError):
                    pass
            if steering:
                self._start_steering()

    def _why(self, call: Any) -> None:
        """`chronicle why` for the call asked about: what the agent was asked and saw, and what it decided."""
        from chronicle.runtime.app.errors import AppError
        from chronicle.runtime.app.why import why as explain

        from .why_cmd import show

        try:
            show(explain(self.store, self.session_id, str(call.id)), self.console, self.store.url)
        except AppError as exc:
            self.console.print(f"[red]error:[/] {escape(printable(str(exc)))}")

    def run(self) -> None:
        session = self.store.session(self.session_id)
        self.console.print(
            f"[bold]chronicle chat[/] — session {self.session_id} ({session.spec.name}, {session.spec.model}). "
            "/help for commands, Ctrl-C cancels a running turn"
            + (", a line typed while it runs steers it" if self.reader.editor else "") + ", /quit leaves."
        )
        if session.active_turn_id is not None:  # left by a crash or a killed chat, or paused for an approval
            turn = self.store.turn(session.active_turn_id)
            why = "waits for an approval" if turn.status == "awaiting_approval" else "was left unfinished"
            self.console.print(f"[yellow]turn {turn.number} ({escape(short(printable(turn.input_text), 60))}) {why}[/]: "
                               "/resume continues it now, and your next message continues it first", soft_wrap=True)
        if session.queue:
            self.console.print(f"[dim]{len(session.queue)} input(s) queued on this session run before your next message "
                               f"(the first: {escape(short(printable(str(session.queue[0].get('text') or '')), 80))})[/]", soft_wrap=True)
        while True:
            waiting = self.store.session(self.session_id, copy=False).pending_auth  # only read
            try:
                if waiting is None and self.pending is not None:
                    line, self.pending = self.pending, None
                    self.console.print(PROMPT, end="", markup=False)  # as input() would have shown it
                elif waiting is None:
                    line = self.reader.read(PROMPT)
                else:
                    self.console.print(f"[yellow]a tool needs {escape(str(waiting['prompt']))}[/]: type it (kept out of the "
                                       "event log and history), or Ctrl-C to cancel")
                    line = self.reader.read_secret(PROMPT)
            except EOFError:
                self.console.print()
                break
            except KeyboardInterrupt:
                if waiting is not None:
                    self.leave_auth(waiting)
                else:
                    self.console.print("\n[dim](nothing is running; /quit leaves)[/]")
                continue
            line = utf8_text(line, "the line").strip()
            if not line:
                continue
            if line.startswith("/"):
                from . import chat_slash  # the slash commands' use cases, once someone types one

                if chat_slash.handle(self, line) == "quit":
                    break
                continue
            self.send(line, waiting)
        self.console.print(f"[dim]bye. session {self.session_id}[/]")

    def leave_auth(self, waiting: dict[str, Any]) -> None:
        """Ctrl-C at the credential prompt is the person's cancel (seed 001: any control leaves auth mode): recorded
        as `chronicle cancel` records it (CredentialCancelled, reason "cancel"), so the next line is a message again."""
        from chronicle.runtime.app.controls import cancel_auth

        cancel_auth(self.store, self.session_id)
        self.console.print(f"\n[yellow]credential {escape(repr(str(waiting['name'])))} not given:[/] auth mode left "
                           "(recorded as a cancel); your next message is an ordinary input")

    def send(self, text: str, waiting: dict[str, Any] | None = None) -> None:
        """`waiting`: the credential the session waited for as the line was read (auth mode takes the line as it)."""
        input_id = self.conversation.submit(text)
        if self.renderer is not None:
            self.renderer.answering(input_id)
        if waiting is not None:  # auth mode took the message as a credential: nothing to run
            from chronicle.runtime.app.running import credential_note

            self.console.print(f"[dim]{escape(credential_note(waiting))}[/]")
            return
        driven = asyncio.run(self._drive())
        if driven.queued is not None:
            self.console.print(f"[yellow]queued[/] ({input_id[:8]}): {escape(driven.queued.reason)}")
            return
        self.report(driven.outcome)

    async def _drive(self) -> Driven:
        """Run the turns; in a terminal, read steering meanwhile. Through a pipe nothing is read while
        a turn runs: the next line is the next message, as before (a script's lines are all there at
        once, and would all become steering of its first turn)."""
        if not self.reader.editor:
            return await self.conversation.drive()
        if self.renderer is not None:
            self.renderer.turn_id = None  # a line typed before this turn starts steers nothing
        self._start_steering()
        try:
            return await self.conversation.drive()
        finally:
            await self._stop_steering()

    def _start_steering(self) -> None:
        # The editor owns the screen from now on: the renderer's live part is drawn by it, above its line
        # (chat_screen.py). Handed over here, before the turn can start a spinner of rich's own.
        if self.renderer is not None:
            self.renderer.area.host(self.reader.redraw)
        self._steering = asyncio.ensure_future(self._read_steering())

    async def _stop_steering(self) -> None:
        task, self._steering = self._steering, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        if self.renderer is not None:
            self.renderer.area.unhost()  # the editor has erased its lines; rich draws what is still live

    async def _read_steering(self) -> None:
        above = self.renderer.area.above if self.renderer is not None else None
        while True:
            try:
                line = (await self.reader.read_async(STEER_PROMPT, above=above)).strip()
            except KeyboardInterrupt:
                # The editor has the terminal, so Ctrl-C arrives as a key: send the SIGINT the
                # terminal would have sent, which cancels the running turn (runtime/app/running.py).
                # Between turns no handler is set and it would stop chat: then it does nothing.
                if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                    signal.raise_signal(signal.SIGINT)
                continue
            except EOFError:
                if self.renderer is not None:
                    self.renderer.area.unhost()
                return  # Ctrl-D: read no more steering for this turn
            if line:
                self.steer(line)

    def steer(self, text: str) -> None:
        """Steer the turn being shown, as `chronicle steer SESSION TEXT --turn TURN` does."""
        from chronicle.runtime.app import controls as app_controls
        from chronicle.runtime.app.errors import AppError

        turn_id = self.renderer.turn_id if self.renderer is not None else None
        if text.startswith("/"):
            from .chat_slash import WHILE_RUNNING

            now = WHILE_RUNNING.get(text.split()[0].lower())
            if now is not None:
                now(self)
                return
            self.console.print("[dim](slash commands wait for the prompt; /stop or Ctrl-C cancels the running turn)[/]")
            return
        if turn_id is None:
            self.console.print("[yellow]↪ not steered:[/] the turn has not started yet; send it again in a moment")
            return
        try:
            app_controls.steer(self.store, self.session_id, text, turn_id=turn_id)
        except AppError as exc:
            self.console.print(f"[yellow]↪ not steered:[/] {escape(printable(str(exc)))}")
            return
        self.console.print(f"[cyan]↪ steering:[/] {escape(printable(text))}")

    def report(self, outcome: TurnOutcome | None) -> None:
        if outcome is None or outcome.status == "completed":
            return
        colour = {"cancelled": "yellow", "awaiting_approval": "yellow"}.get(outcome.status, "red")
        self.console.print(f"[{colour}]{outcome.status}:[/] {escape(printable(outcome.reason or ''))}")


@limit_options
def chat(
    session: Annotated[Optional[str], typer.Option("--session", help="Continue this session (id or unique prefix)")] = None,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: MaxIterationsOption = None,
    agents: AgentsOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval without asking")] = False,
    db: DbOption = None,
    tools: ToolsOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Talk with an agent: streamed answers, tools shown as they run, approvals asked inline (y/n/a).

    A new session is specified as `run` specifies it (the agents table of chronicle.toml, --max-iterations); a continued one keeps what it recorded. While a turn runs, chat holds the session as `run` does.
    """
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    from chronicle.runtime.app.running import Conversation, RunOptions

    if session is not None and from_environment("model"):
        model = None  # CHRONICLE_MODEL picks a new session's model; changing a session's takes --model or /model (recorded)
    options = RunOptions(provider=provider, model=model, workspace=workspace, max_iterations=max_iterations, agents=agents,
                         auto_approve=yes, limits=limits, interactive=True, tools=tuple(tools or ()))
    if (missing := missing_store(db)) is not None:
        with cli_errors():
            if session is not None:  # no store holds no session: say so without creating one
                fail(f"no session matches {session!r}: there is no Chronicle store at {missing} yet", 2)
            Conversation.check_new(options)  # a bad flag on a first run leaves no empty store behind
    first: str | None = None
    if session is None and not interactive():  # from a pipe: a new session only once there is something to say
        first = first_piped_line()
        if first is None:
            err_console.print("note: no input came (stdin is empty or closed), so no session was started")
            return
    with store_command(db) as store:
        console = SafeConsole(highlight=False, emoji=False)
        holder: dict[str, Chat] = {}

        async def approve(call: Any) -> str | None:
            return await holder["chat"].approve(call)

        renderer = ChatRenderer(console)
        conversation = Conversation.open(store, session, options, [renderer], approver=approve)
        for note in conversation.notes:
            console.print(f"[dim]{escape(note)}[/]")
        holder["chat"] = Chat(conversation, console, renderer)
        holder["chat"].pending = first
        holder["chat"].run()


def first_piped_line() -> str | None:
    """The first message a pipe gives (blank lines skipped, as chat skips them), or None when it ends first:
    `chat < /dev/null` started an empty session each time."""
    reader = LineReader(editor=False)
    while True:
        try:
            line = reader.read("")
        except EOFError:
            return None
        if line.strip():
            return line


__all__ = ["chat", "Chat"]
