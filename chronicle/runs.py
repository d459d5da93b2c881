"""An Agent handed to the use cases that start sessions: `run` (Conversation) and `submit`.

The use cases specify a new session from flags and chronicle.toml; the public API hands them
the Agent as the registry instead, and everything else — the default system prompt, the checks
before anything is recorded, the session's lease, the loop factory — is theirs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence
from uuid import UUID

from chronicle.runtime.app import resume as resuming
from chronicle.runtime.app.errors import AppError, DefinitionError
from chronicle.runtime.app.running import Conversation, RunOptions
from chronicle.runtime.app.specs import ignored_in_code, resolve_workspace
from chronicle.runtime.attachments import AttachmentError, checked_attachments
from chronicle.runtime.import_paths import bind
from chronicle.runtime.store import ChronicleStore

from .agent import Agent
from .errors import warn


def checked(agent: Agent) -> Agent:
    if not isinstance(agent, Agent):
        raise DefinitionError(f"expected an Agent, got {type(agent).__name__}: define it with chronicle.Agent(...)")
    return agent


def for_a_worker(agent: Agent) -> Agent:
    """A session submitted for a worker must be runnable in another process: refused (exit 2, nothing
    recorded) if its tools, checks or middleware were defined in the script being run."""
    here = agent.only_here()
    script = [p.partition(":")[2] for p in here if p.startswith("__main__:")]
    if script:
        raise AppError(f"{', '.join(script)} defined in the script being run (__main__), which a worker cannot import: "
                       "move it into a module, or run the agent in this process with run()", 2)
    if here:  # a factory's closure: no import path reaches it, so a worker would skip the session forever
        raise AppError(f"{', '.join(here)} defined inside a function, which a worker cannot import: define it at a "
                       "module's top level (a tool can read per-tenant settings from its ToolContext or the workspace), "
                       "or run the agent in this process with run()", 2)
    return agent


def run_options(agent: Agent, workspace: str | Path | None, auto_approve: bool, max_iterations: int | None,
                model: str | None = None, max_attempts: int | None = None) -> RunOptions:
    checked(agent)
    return RunOptions(provider=agent.provider, model=model or agent.model, workspace=Path(workspace) if workspace else None,
                      max_iterations=max_iterations, auto_approve=auto_approve, registry=agent.registry(workspace),
                      max_attempts=max_attempts)


def check_new(agent: Agent, prompt: str, workspace: str | Path | None, attachments: Sequence[Any] | None,
              auto_approve: bool, max_iterations: int | None, model: str | None = None, max_attempts: int | None = None) -> None:
    """What a new session's run would refuse (its provider, workspace, prompt, attachments, …), checked without a store:
    a `run` that is refused before a store exists leaves none behind, as `chronicle run` leaves none."""
    Conversation.check_new(run_options(agent, workspace, auto_approve, max_iterations, model, max_attempts),
                           first_input=prompt, attachments=attachments)


def check_submitted(agent: Agent, prompt: str, workspace: str | Path | None, attachments: Sequence[Any] | None = None,
                    max_iterations: int | None = None) -> None:
    """What `submit`/`submit_job` of a new session would refuse, checked without a store: refused before a store
    exists, they leave none behind, as `run` leaves none."""
    if not prompt.strip():
        raise AppError("the prompt is empty; say what the agent should do", 2)
    for_a_worker(checked(agent))
    try:
        checked_attachments(attachments)
    except AttachmentError as exc:
        raise AppError(str(exc), 2) from None
    resuming.checked_spec(agent.provider, agent.model, resolve_workspace(Path(workspace) if workspace else None),
                          max_iterations, registry=agent.registry(workspace))


def open_conversation(store: ChronicleStore, agent: Agent, prompt: str, session: str | UUID | None, workspace: str | Path | None,
                      attachments: Sequence[Any] | None, auto_approve: bool, max_iterations: int | None,
                      subscribers: list[Callable[[Any], Any]], model: str | None = None,
                      max_attempts: int | None = None) -> Conversation:
    """`session` continues with what it recorded; the agent's provider and model (`model` first) still apply, like
    --provider/--model: another model than the session's is recorded as a change (Session.ModelChanged)."""
    options = run_options(agent, workspace, auto_approve, max_iterations, model, max_attempts)
    conversation = Conversation.open(store, session, options, subscribers, first_input=prompt, attachments=attachments)
    bind(conversation.session_id, agent._live)  # resumed in this process (an approval), it runs this Agent's objects
    return conversation


def submit(store: ChronicleStore, agent: Agent, prompt: str, session: str | UUID | None, workspace: str | Path | None,
           attachments: Sequence[Any] | None) -> dict[str, Any]:
    """`submit --json`'s object; a new session is specified by the agent and checked before it is recorded."""
    checked(agent)
    if session:
        submitted = resuming.submit(store, prompt, session=session, attachments=attachments)
        note = ignored_in_code(submitted.session_id, store.session(submitted.session_id).spec, agent.registry(workspace))
        if note:
            warn(note)
        if workspace is not None:  # `submit --session --workspace` is refused; a program's was dropped without a word
            warn(f"note: workspace ignored; session {submitted.session_id} is run by a worker in the workspace it recorded "
                 "(resume(session, workspace=...) runs it elsewhere)")
    else:
        for_a_worker(agent)
        submitted = resuming.submit(store, prompt, provider=agent.provider, model=agent.model,
                                    workspace=Path(workspace) if workspace else None, registry=agent.registry(workspace),
                                    attachments=attachments)
    bind(submitted.session_id, agent._live)
    return submitted.row()
