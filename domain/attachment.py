"""An attachment: bytes a user sent with an input (an image, a PDF), stored once, by content.

Its id is derived from the bytes' SHA-256 (domain/ids.py), so sending the same file again
finds it stored and records only a reference: the inputs and turns that use it hold content
blocks whose source names the hash, and the runtime puts the bytes back into the request
just before it goes to the provider. The data is base64 text, as the Messages API takes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .event_type import EventType

#: What the Messages API accepts: images as image blocks, PDFs as document blocks.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DOCUMENT_TYPES = ("application/pdf",)


def block_type(media_type: str) -> str | None:
    """"image", "document", or None for a media type the API does not take."""
    if media_type in IMAGE_TYPES:
        return "image"
    if media_type in DOCUMENT_TYPES:
        return "document"
    return None


def reference_block(sha256: str, media_type: str, size: int, name: str = "") -> dict[str, Any]:
    """The content block an input records: the API's block shape with a source that names the bytes."""
    kind = block_type(media_type)
    if kind is None:
        raise ValueError(f"unsupported media type {media_type!r}")
    source: dict[str, Any] = {"type": "attachment", "media_type": media_type, "sha256": sha256, "size": size}
    if name:
        source["name"] = name
    return {"type": kind, "source": source}


class Attachment(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Created(Aggregate.Created, Event):
        sha256: str
        media_type: str
        size: int
        data: str

    @event(Created)
    def __init__(self, id: UUID, sha256: str, media_type: str, size: int, data: str, timestamp: datetime) -> None:
        self.sha256 = sha256
        self.media_type = media_type
        self.size = size
        self.data = data
        self.created_at = timestamp
