"""Background jobs as use cases: submit, list, one job, cancel. `chronicle jobs`, `/job` in chat and
the Python API (`Chronicle.submit_job`, `jobs`, `job`, `cancel_job`) call these and print or return the
same rows (`chronicle jobs --json`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

from ..agents.registry import AgentRegistry
from ..jobs import JobEnded, cancel_job, find_job, job_row, jobs, submit_job
from ..limit_flags import LimitFlags
from ..pasteable import pasteable
from ..store import ChronicleStore, NotFound
from ..tools.imports import ToolLoadError
from .errors import AppError
from .queries import session_id
from .resume import checked_spec
from .specs import resolve_workspace


def submit(store: ChronicleStore, prompt: str, *, provider: str | None = None, model: str | None = None,
           workspace: Path | None = None, max_iterations: int | None = None, registry: AgentRegistry | None = None,
           origin: str = "cli", limits: LimitFlags | None = None) -> dict[str, Any]:
    """A new job (a session queued for a worker), checked as `run` checks it before anything is recorded; `limits`
    (the limit flags) recorded with it, as `run` records them."""
    if not prompt.strip():
        raise AppError("the prompt is empty; say what the agent should do", 2)
    spec = checked_spec(provider, model, resolve_workspace(workspace), max_iterations, registry=registry, limits=limits)
    return job_row(store, submit_job(store, spec, prompt, origin=origin))


def submit_beside(store: ChronicleStore, ref: str | UUID, prompt: str, origin: str = "chat") -> dict[str, Any]:
    """A new job with the agent, workspace and provider of session `ref` (`/job PROMPT` in a chat): that
    spec already runs there, so only the prompt is checked."""
    if not prompt.strip():
        raise AppError("say what the job should do: /job PROMPT", 2)
    try:
        return job_row(store, submit_job(store, store.session(session_id(store, ref)).spec, prompt, origin=origin))
    except ToolLoadError as exc:  # a tool path of the session's that no longer loads: no worker could run the job
        raise AppError(str(exc), 2) from None


def listing(store: ChronicleStore) -> list[dict[str, Any]]:
    """Every job, oldest first."""
    return [job_row(store, job) for job in jobs(store)]


def one(store: ChronicleStore, ref: str | UUID) -> dict[str, Any]:
    """One job; NotFound (exit 1) if the session is not a job."""
    sid = session_id(store, ref)
    job = find_job(store, sid)
    if job is None:
        raise NotFound(f"{ref} is not a job; `{pasteable('jobs', store.url)}` lists them")
    return job_row(store, job)


def cancel(store: ChronicleStore, ref: str | UUID) -> dict[str, Any]:
    """Cancel a job: a queued one never starts, one waiting for approval ends now, a running one stops at its next safe point.
    One that already ended (completed, failed, stopped, cancelled) is refused with exit 1, and nothing is recorded."""
    try:
        return job_row(store, cancel_job(store, session_id(store, ref)))
    except JobEnded as ended:
        raise AppError(str(ended), 1) from None
