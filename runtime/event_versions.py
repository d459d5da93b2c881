"""Events a newer Chronicle wrote are refused, not misread.

An event class that changes shape bumps its `class_version`, and the code that knows the new shape reads the
older ones through upcasters (`upcast_v1_v2`). eventsourcing upcasts upward only: an event stored with a higher
`class_version` than the running code's class was decoded as it stood, the newer fields riding along unknown and
whatever the older fields now mean taken at their old meaning. A release rolled back to, or an older process still
running beside a newer one, read such events silently, and could act on them wrongly.

This mapper refuses one instead (`NewerEvent`, naming the event class and both versions): every reader already
treats an event that does not decode as one (`doctor` lists it as an unreadable event, the read models pass over it,
a session holding it cannot be loaded, a bundle holding it is not imported), and a snapshot a newer release took of
an aggregate whose class is newer than this one's is passed over like any snapshot that does not decode (a cache:
the events are read instead). Releases before this module read them silently (docs/deployment.md).

The decoding steps are eventsourcing 9.5.6's `Mapper.to_domain_event` (decrypt, decompress, decode, originator id
and version, upcast), with the stored version compared before it is dropped from the state.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from eventsourcing.domain import Snapshot
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, find_id_convertor
from eventsourcing.utils import resolve_topic


class NewerEvent(MapperDeserialisationError):
    """A stored event (or snapshot) whose class_version is above what this code's class reads: written by a newer
    Chronicle. A ValueError, as every failure to decode a stored event is."""


class VersionedMapper(Mapper):  # type: ignore[type-arg]
    """eventsourcing's Mapper, refusing an event stored with a class_version above its class's (`NewerEvent`). A class
    with `reads_as_stored = True` takes any stored state as it stands, on purpose: one that reads rows as they were
    written, whatever their class (replay_earlier.RecordedState)."""

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        cls = resolve_topic(stored_event.topic)
        state = self.decoded_state(stored_event)
        stored = state.pop("class_version", 1)
        reads, as_stored, snapshot = _reading(cls)
        if stored > reads and not as_stored:
            raise NewerEvent(newer_message(cls.__qualname__, stored, reads, stored_event))
        if snapshot:
            check_snapshot(state, stored_event)
        convert = find_id_convertor(cls, type(stored_event.originator_id))  # type: ignore[arg-type]  # as eventsourcing casts
        state["originator_id"] = convert(stored_event.originator_id)
        state["originator_version"] = stored_event.originator_version
        for version in range(stored, reads):
            getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        return event

    def decoded_state(self, stored_event: StoredEvent) -> dict[str, Any]:
        """The event's state as stored: decrypted, decompressed and decoded; MapperDeserialisationError if it is not."""
        data = stored_event.state
        try:
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
            state: dict[str, Any] = self.transcoder.decode(data)
        except Exception as exc:
            raise MapperDeserialisationError(
                f"Failed to deserialise state of stored event with topic '{stored_event.topic}', originator_id "
                f"'{stored_event.originator_id}' and originator_version {stored_event.originator_version}: {exc}"
            ) from exc
        return state


@lru_cache(maxsize=None)
def _reading(cls: Any) -> tuple[int, bool, bool]:
    """What this code reads of an event class: its class_version, whether it takes any stored state as it stands, and
    whether it is a snapshot. Asked once per class rather than for each of a rebuild's 100k events."""
    snapshot = cls is Snapshot or (isinstance(cls, type) and issubclass(cls, Snapshot))
    return getattr(cls, "class_version", 1), bool(getattr(cls, "reads_as_stored", False)), snapshot


def check_snapshot(state: dict[str, Any], stored_event: StoredEvent) -> None:
    """A snapshot holds its aggregate's state with the aggregate class's version, upcast when it is loaded: one taken
    by a newer release of a newer aggregate class is refused as its events would be."""
    inner = state.get("state")
    if not isinstance(inner, dict):
        return
    aggregate = resolve_topic(state["topic"])
    stored, reads = inner.get("class_version", 1), getattr(aggregate, "class_version", 1)
    if stored > reads:
        raise NewerEvent(newer_message(f"a snapshot of {aggregate.__qualname__}", stored, reads, stored_event))


def newer_message(what: str, stored: int, reads: int, stored_event: StoredEvent) -> str:
    return (f"{what} of {stored_event.originator_id} v{stored_event.originator_version} is stored as class_version {stored}, "
            f"which this release reads only up to {reads}: a newer Chronicle wrote it; upgrade Chronicle to read it")


MAPPER_TOPIC = f"{VersionedMapper.__module__}:{VersionedMapper.__qualname__}"
