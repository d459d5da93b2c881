"""Every event class Chronicle stores, gathered into the vocabulary `chronicle doctor` checks against,
and the check of events about to be written (CHRONICLE_CHECK_EVENTS=1, which the test suite sets).

The domain's aggregates hold most of them; the index logs of the runtime (sessions, jobs,
routine runs, repairs, reflections) and their readers' checkpoints hold the rest. They are found by walking DomainEvent's
subclasses after importing the modules that declare them, and each is taken as its topic
resolves, so a class eventsourcing rebuilt for an `@event` method counts once. An event class
added in a runtime module not listed below is missing from the vocabulary; the test suite, which
checks every write, then fails on its first event (and doctor would report each one).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Any, Iterable

from eventsourcing.domain import DomainEvent, Snapshot
from eventsourcing.utils import resolve_topic

from .vocabulary import Misfit, Vocabulary

#: Topics of Chronicle's own events; anything else in the store (an application's own aggregates
#: beside ours) is not ours to hold to a vocabulary.
OUR_TOPICS = "chronicle."

#: Runtime modules that declare events of their own (the index logs).
RUNTIME_EVENT_MODULES = ("store", "jobs", "routine_engine", "self_repair", "task_board", "index_checkpoints", "reply_index",
                         "import_log")


@lru_cache(maxsize=1)
def stored_vocabulary() -> Vocabulary:
    import chronicle.domain as domain

    for info in pkgutil.iter_modules(domain.__path__):
        importlib.import_module(f"chronicle.domain.{info.name}")
    for name in RUNTIME_EVENT_MODULES:
        importlib.import_module(f"chronicle.runtime.{name}")
    return Vocabulary(event_classes())


def event_classes() -> set[type]:
    found, todo = set(), [DomainEvent]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("chronicle.") and not issubclass(cls, Snapshot):
            found.add(resolve_topic(f"{cls.__module__}:{cls.__qualname__}"))
    return found


def misfit(topic: str, event: Any) -> Misfit | None:
    """Why a decoded event of `topic` does not fit the vocabulary; None if it does or is not ours."""
    return stored_vocabulary().check(topic, event) if topic.startswith(OUR_TOPICS) else None


class MisfitEvent(ValueError):
    """An event about to be written does not fit its declared fields: a bug in whatever built it."""


def refuse_misfits(mapper: Any, events: Iterable[Any]) -> None:
    """Encode each event as it will be stored and decode it back, as a reader will; a misfit raises
    before anything is written, naming the event and the field."""
    for event in events:
        stored = mapper.to_stored_event(event)
        found = misfit(stored.topic, mapper.to_domain_event(stored))
        if found is not None:
            raise MisfitEvent(f"refusing to write {found.topic} v{stored.originator_version}: {found.detail}")
