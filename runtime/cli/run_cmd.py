"""`chronicle run`: record the input, run the turn, stream what happens, exit with its outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from .common import DbOption, JsonOption, WorkspaceOption, cli_errors, err_console, fail, missing_store, open_store, pasted, read_prompt
from .limits import LimitFlags, limit_options
from .pipes import keep_going
from .render import HumanRenderer, JsonLinesRenderer, printable

if TYPE_CHECKING:  # the application layer (the loop, pydantic, the providers) is imported when a turn runs, not for --help
    from chronicle.runtime.app.running import Queued
    from chronicle.runtime.loop import TurnOutcome

ProviderOption = Annotated[
    Optional[str],
    typer.Option("--provider", help="anthropic | openai-compatible | scripted:PATH (default: anthropic when ANTHROPIC_API_KEY is set)", show_default=False),
]
ModelOption = Annotated[Optional[str], typer.Option("--model", envvar="CHRONICLE_MODEL", help="Model name", show_default=False)]
MaxIterationsOption = Annotated[
    Optional[int],
    typer.Option("--max-iterations", min=1, show_default=False,
                 help="Model calls allowed in one turn (default: the agent's max_iterations, 20)"),
]
AgentsOption = Annotated[
    Optional[Path],
    typer.Option("--agents", help="Agent registry: a TOML file with one agents.NAME table per agent (default: chronicle.toml in the workspace, if present)",
                 show_default=False),
]
ToolsOption = Annotated[
    Optional[list[str]],
    typer.Option("--tools", help="Your own tools by import path, module:attribute (a @tool function, a Tool class or a list of them); "
                 "repeatable; the workspace is importable. New sessions only", show_default=False),
]
AttachOption = Annotated[
    Optional[list[Path]],
    typer.Option("--attach", help="Send this file with the prompt: a png, jpeg, gif or webp image, or a PDF; repeatable", show_default=False),
]
MaxAttemptsOption = Annotated[
    Optional[int],
    typer.Option("--max-attempts", envvar="CHRONICLE_MAX_ATTEMPTS", min=1, show_default=False,
                 help="Tries per model call, the first included, for rate limits, overloads and network errors (default: 8)"),
]


def report(outcome: TurnOutcome | None, as_json: bool, url: str) -> int:
    """The outcome on one stderr line, always naming the session so a person knows what to `log` or `resume`
    (`url`: the store's, for those commands: runtime/pasteable.py).

    The live `error` event of the top-level turn is not rendered (HumanRenderer), so this is the
    one place a failure is told; every status that is not `completed` gets its line here.
    """
    if outcome is None:
        return 0
    sid = outcome.session_id
    reason = escape(printable(outcome.reason or outcome.status))
    see = f"(session {sid}; see `{pasted(f'log {sid}', url)}`)"
    if outcome.status == "failed":
        err_console.print(f"[red]error:[/] turn failed: {reason} {see}")
    elif outcome.status == "awaiting_approval":
        err_console.print(
            f"[yellow]paused:[/] {reason}. See why with `{pasted(f'why {sid}', url)}`; approve with `{pasted(f'approve {sid}', url)}` "
            f"(or deny), then `{pasted(f'resume {sid}', url)}`; or re-run with --yes."
        )
    elif outcome.status == "cancelled":
        err_console.print(f"[yellow]cancelled:[/] {reason} {see}")
    elif outcome.status == "stopped":
        err_console.print(f"[red]stopped:[/] {reason} {see}")
    elif outcome.status != "completed":  # interrupted (store lost), conflict, or anything new: the reason says what to do
        err_console.print(f"[red]error:[/] {reason} (session {sid})")
    elif outcome.reason and not as_json:  # completed, but not normally (an answer cut at max_tokens)
        err_console.print(f"[yellow]warning:[/] {reason} (session {sid})")
    elif not as_json:
        err_console.print(f"[dim]session {sid}[/]")
    return outcome.exit_code


@limit_options
def run(
    prompt: Annotated[str, typer.Argument(help="What to ask the agent (`-`: read it from stdin)")],
    session: Annotated[Optional[str], typer.Option("--session", help="Continue this session (id or unique prefix)")] = None,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: MaxIterationsOption = None,
    agents: AgentsOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval (bash)")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
    max_attempts: MaxAttemptsOption = None,
    tools: ToolsOption = None,
    attach: AttachOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Run one turn: record PROMPT, let the agent work, print the answer as it streams.

    On a busy session the prompt is queued (durably, before anything else) and runs after the turn in flight; if another live process holds the session, this one exits (status queued) and that process picks the prompt up. A turn left by a process that died is continued here. Inputs queued while this process works run before it exits.
    """
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    from chronicle.runtime.app.running import Conversation, RunOptions

    with cli_errors():
        prompt = read_prompt(prompt)
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        if session is not None and from_environment("model"):
            model = None  # CHRONICLE_MODEL picks a new session's model; changing a session's takes --model (recorded)
        options = RunOptions(provider=provider, model=model, workspace=workspace, max_iterations=max_iterations, agents=agents,
                             auto_approve=yes, max_attempts=max_attempts, limits=limits, tools=tuple(tools or ()))
        if (missing := missing_store(db)) is not None:
            if session is not None:  # no store holds no session: say so without creating one
                fail(f"no session matches {session!r}: there is no Chronicle store at {missing} yet", 2)
            Conversation.check_new(options, attachments=attach)  # a bad flag on a first run leaves no empty store behind
        store = open_store(db)
        renderer = JsonLinesRenderer() if as_json else HumanRenderer()
        conversation = Conversation.open(store, session, options, [renderer], first_input=prompt, attachments=attach)
        if isinstance(renderer, HumanRenderer):
            renderer.answering(conversation.input_id)
        for note in conversation.notes:
            err_console.print(f"[dim]{escape(note)}[/]")
        driven = asyncio.run(conversation.drive())
        if driven.queued is not None:
            raise typer.Exit(report_queued(driven.queued, as_json, store.url))
        code = report(driven.outcome, as_json, store.url)
        if conversation.input_id is not None and driven.outcome is not None and conversation.input_id not in driven.answered_inputs(store):
            sid = driven.outcome.session_id
            err_console.print(f"[yellow]note:[/] this prompt has not run: an input queued before it ran first and ended "
                              f"{driven.outcome.status}; the prompt waits in the session's queue, and "
                              f"`{pasted(f'resume {sid}', store.url)}` runs it")
        raise typer.Exit(code)


def from_environment(parameter: str) -> bool:
    """Whether the running command's `parameter` came from its environment variable, not a flag.
    (typer parses with its own copy of click, so the context and the sources are that copy's.)"""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    context = get_current_context(silent=True)
    return context is not None and context.get_parameter_source(parameter) == ParameterSource.ENVIRONMENT


def report_queued(queued: Queued, as_json: bool, url: str) -> int:
    """Queued behind a live process: exit 0, the input is durable and that process runs it."""
    if not as_json:
        sid = queued.session_id
        err_console.print(f"[yellow]queued:[/] {escape(queued.reason)}. Session {sid}. If that process is gone, its lease runs out "
                          f"at {queued.until} and `{pasted(f'resume {sid}', url)}` continues the session.")
    return 0
