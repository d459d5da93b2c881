"""Background jobs: submit a session for workers, list jobs with a status read from the session, cancel.

`job_id` is the session's id (a job *is* a session run by a worker); the Job aggregate beside it
records the origin and a cancellation, and an index log lists every job. Status comes from the
session and its turns, never from a second copy that could disagree: queued, running,
awaiting_approval, interrupted, then the last turn's ending (completed, failed, stopped,
cancelled), or cancelled once the job is.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4, uuid5

from eventsourcing.application import AggregateNotFoundError, EventSourcedLog
from eventsourcing.domain import DomainEvent

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import CHRONICLE_NS
from chronicle.domain.job import Job
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .controls import cancel_paused_turn, request_cancel
from .leases import current_lease
from .pasteable import pasteable
from .pending import NextEntry
from .sessions import queue_scanned, tool_names_now
from .shred_marks import forgotten_cause
from .store import ChronicleStore, NotFound

JOB_INDEX_ID = uuid5(CHRONICLE_NS, "/jobs")


class JobLogged(DomainEvent):
    job_id: UUID


def job_aggregate_id(session_id: UUID) -> UUID:
    return uuid5(session_id, "job")


def index(store: ChronicleStore) -> EventSourcedLog[JobLogged]:
    return EventSourcedLog(store.events, JOB_INDEX_ID, JobLogged)


def submit_job(store: ChronicleStore, spec: AgentSpec, prompt: str, origin: str = "cli", clock: Clock = SYSTEM_CLOCK) -> Job:
    """A new session with the prompt queued, its Job and index entry: one transaction. The spec records the names its
    import paths hold now, as every new session's (sessions.tool_names_now)."""
    now = clock.now()
    session = Session.start(uuid4(), tool_names_now(spec), now)
    queue_scanned(session, uuid4().hex, prompt, now, kind="job")
    prompt = session.queue[-1]["text"]  # the Job records the prompt too: as queued, secrets cut out
    job = Job(id=job_aggregate_id(session.id), session_id=session.id, prompt=prompt, origin=origin, timestamp=now)
    store.create_session(session, job, NextEntry(lambda: index(store).trigger_event(job_id=job.id)))
    return job


def find_job(store: ChronicleStore, session_id: UUID) -> Job | None:
    """None also for the job of a forgotten session (`chronicle forget`): its content is erased."""
    try:
        job: Any = store.repository.get(job_aggregate_id(session_id))
    except AggregateNotFoundError:
        return None
    except Exception as exc:
        if forgotten_cause(exc) is None:
            raise
        return None
    return job if isinstance(job, Job) else None


def jobs(store: ChronicleStore) -> list[Job]:
    found = []
    for entry in index(store).get():
        try:
            job: Any = store.repository.get(entry.job_id)
        except AggregateNotFoundError:
            continue  # an index entry whose session write lost a race
        except Exception as exc:
            if forgotten_cause(exc) is None:
                raise
            continue  # its session was forgotten: nothing of it is listed
        if isinstance(job, Job):
            found.append(job)
    return found


def cancelled(store: ChronicleStore, session_id: UUID) -> bool:
    job = find_job(store, session_id)
    return job is not None and job.status == "cancelled"


def status_of(store: ChronicleStore, job: Job) -> str:
    session = store.session(job.session_id)
    if session.active_turn_id is not None:
        turn = store.turn(session.active_turn_id)
        if job.status == "cancelled":
            return "cancelling"
        return {"pending": "running"}.get(turn.status, turn.status)
    if job.status == "cancelled":
        return "cancelled"
    if session.queue:
        return "queued"
    return store.turn(session.turns[-1]).status if session.turns else "queued"


def job_row(store: ChronicleStore, job: Job) -> dict[str, Any]:
    """`chronicle jobs --json`: job_id, status, prompt, origin, created_at, worker, turns, final_text."""
    session = store.session(job.session_id)
    lease = current_lease(store, job.session_id)
    last = store.turn(session.turns[-1]) if session.turns else None
    return {
        "job_id": str(job.session_id), "status": status_of(store, job), "prompt": job.prompt, "origin": job.origin,
        "created_at": job.submitted_at.isoformat(), "agent": session.spec.name,
        "worker": lease.holder if lease is not None and lease.status == "held" else None, "turns": len(session.turns),
        "final_text": (last.final_text or "") if last is not None and last.finished else "",
        "reason": job.cancel_reason or (last.reason if last is not None and last.finished else None),
    }


#: The statuses of a job that is over: there is nothing left to cancel.
ENDED = ("completed", "failed", "stopped", "cancelled")


class JobEnded(Exception):
    """A cancel asked of a job that already ended; nothing was recorded."""

    def __init__(self, session_id: UUID, status: str, reason: str | None) -> None:
        self.status = status
        how = f"{status} ({' '.join(reason.split())})" if reason else status
        super().__init__(f"job {session_id} already ended: {how}; there is nothing to cancel")


def cancel_job(store: ChronicleStore, session_id: UUID, reason: str = "cancelled by the user", clock: Clock = SYSTEM_CLOCK) -> Job:
    """Cancel the job: its queued input is never started, a turn waiting for approval ends now, a running one is asked to stop.

    A job that already ended (completed, failed, stopped, cancelled) raises JobEnded and records nothing:
    its status is read from its session, and a Job.Cancelled after the fact would rewrite how it ended."""
    job = find_job(store, session_id)
    if job is None:
        raise NotFound(f"session {session_id} is not a job; `{pasteable('jobs', store.url)}` lists them")
    row = job_row(store, job)
    if row["status"] in ENDED:
        raise JobEnded(session_id, row["status"], row["reason"])
    if job.status != "cancelled":
        job.cancel(reason, clock.now())
        store.save(job)
    session = store.session(session_id)
    if session.active_turn_id is not None:
        if cancel_paused_turn(store, session_id, reason, clock) is None:
            request_cancel(store, session_id, reason, clock)
    return job
