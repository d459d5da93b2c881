"""`chronicle chat`: an interactive session in the terminal.

Plain `input()` for the prompt (no TUI framework): each line is queued on the session and the
loop runs it, streaming text and tool calls as they happen. Approvals are answered inline;
Ctrl-C cancels the running turn (the chat goes on); slash commands live in chat_slash.py.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.effects import with_effects
from chronicle.runtime.loop import LoopOptions, TurnOutcome
from chronicle.runtime.memory import with_memory
from chronicle.runtime.providers import default_model, default_provider_name
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.settings import load_config
from chronicle.runtime.skills import with_skills, workspace_skills
from chronicle.runtime.tools import DEFAULT_TOOLS

from . import chat_slash
from .common import DbOption, WorkspaceOption, cli_errors, open_store
from .limits import LimitFlags, limit_options, resolve_limits
from .render import HumanRenderer, printable, short, whole_input
from .run_cmd import (
    ModelOption, ProviderOption, cli_loop, drive_session, resolve_workspace, running_elsewhere, session_workspace,
)

PROMPT = "you> "
ANSWERS = {"y": "approve", "yes": "approve", "n": "deny", "no": "deny", "a": "always", "always": "always"}


class ChatRenderer(HumanRenderer):
    """The run renderer, plus what a person at the keyboard needs to see."""

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "approval_needed":
            self._end_text()
            why = "" if event.reason == "requires approval" else f" ({escape(printable(event.reason))})"
            self.console.print(f"[yellow]? {escape(short(event.name))} needs approval{why}[/]")
            self.console.print(escape(whole_input(event.input)), style="dim")
            return
        if kind == "compaction":
            self._end_text()
            self.console.print(f"[magenta]⤵ compacted {event.turns_compacted} turn(s) ({event.strategy})[/]")
            return
        super().__call__(event)


class Chat:
    def __init__(self, store: Any, session_id: Any, loop: Any, settings: Any, console: Console) -> None:
        self.store = store
        self.session_id = session_id
        self.loop = loop
        self.settings = settings
        self.console = console
        loop.approver = self.approve

    async def approve(self, call: Any) -> str | None:
        """Ask inline. Ctrl-C here cancels the turn; end of input leaves the call awaiting approval."""
        event_loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        try:
            event_loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            while True:
                answer = input("  approve? [y]es / [n]o / [a]lways: ").strip().lower()
                if answer in ANSWERS:
                    return ANSWERS[answer]
                self.console.print("  answer y, n or a")
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

    def run(self) -> None:
        session = self.store.session(self.session_id)
        self.console.print(
            f"[bold]chronicle chat[/] — session {self.session_id} ({session.spec.name}, {session.spec.model}). "
            "/help for commands, Ctrl-C cancels a running turn, /quit leaves."
        )
        while True:
            try:
                line = input(PROMPT)
            except EOFError:
                self.console.print()
                break
            except KeyboardInterrupt:
                self.console.print("\n[dim](nothing is running; /quit leaves)[/]")
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if chat_slash.handle(self, line) == "quit":
                    break
                continue
            self.send(line)
        self.console.print(f"[dim]bye. session {self.session_id}[/]")

    def send(self, text: str) -> None:
        input_id = submit_input(self.store, self.session_id, text)
        elsewhere = running_elsewhere(self.store, self.session_id)
        if elsewhere is not None:
            self.console.print(f"[yellow]queued[/] ({input_id[:8]}): turn {elsewhere} is running in another process, which runs this next")
            return
        outcome = asyncio.run(drive_session(self.loop, self.session_id))
        self.report(outcome)

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
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1, help="Model calls allowed in one turn")] = 20,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval without asking")] = False,
    db: DbOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Talk with an agent: streamed answers, tools shown as they run, approvals asked inline (y/n/a)."""
    with cli_errors():
        store = open_store(db)
        sid = store.resolve_session_id(session) if session else None
        spec = store.session(sid).spec if sid else None
        ws = resolve_workspace(workspace or session_workspace(spec))
        settings = resolve_limits(limits, ws)
        console = Console(highlight=False)
        if sid and spec:
            provider_name = provider or spec.provider or default_provider_name()
        else:
            provider_name = provider or default_provider_name()
            spec = with_skills(AgentSpec(
                name="main", provider=provider_name or "",
                model=model or ("scripted" if (provider_name or "").startswith("scripted:") else default_model(provider_name)),
                tools=DEFAULT_TOOLS, max_iterations=max_iterations, workspace=str(ws),
            ), workspace_skills(ws))
            spec = with_effects(with_memory(spec, ws), load_config(ws))
        loop = cli_loop(store, spec, ChatRenderer(console), provider_name=provider_name, model=model, workspace=ws,
                        options=LoopOptions(max_iterations=max_iterations, auto_approve=yes), settings=settings, interactive=True)
        if sid is None:
            created, _ = start_session(store, spec)
            sid = created.id
        Chat(store, sid, loop, settings, console).run()


__all__ = ["chat", "Chat", "Path"]
