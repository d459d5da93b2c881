"""Attachments: files and bytes sent with an input, stored once by content, sent as image/document blocks.

`store_attachments` checks every item (readable, a type the Messages API takes, not too big)
before anything is stored, so bad input records nothing; then stores the bytes as Attachment
aggregates keyed by their hash (the same bytes twice are stored once) and returns the reference
blocks the input records. `with_attachment_data` puts the bytes back into a request just before
it goes to the provider; fingerprints, history and replay work on the references, which name
the exact bytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

from eventsourcing.persistence import IntegrityError

from chronicle.domain.attachment import IMAGE_TYPES, Attachment, block_type, reference_block
from chronicle.domain.content import DocumentBlock, ImageBlock, Message
from chronicle.domain.ids import attachment_id

from .clock import SYSTEM_CLOCK, Clock
from .providers.base import ModelRequest

#: The Messages API refuses requests over 32 MB; one attachment that size could never be sent.
MAX_BYTES = 32 * 1024 * 1024
SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
            ".pdf": "application/pdf"}
SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
              (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"))
ACCEPTED = "png, jpeg, gif and webp images and PDF documents"


class AttachmentError(ValueError):
    """An attachment that cannot be sent; the message names it."""


def sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((media for magic, media in SIGNATURES if data.startswith(magic)), None)


def read_item(item: Any) -> tuple[bytes, str, str]:
    """(bytes, media type, name) of a path, or of a (bytes, media type) pair."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (bytes, bytearray)):
        data, media_type = bytes(item[0]), str(item[1]).strip().lower()
        name = ""
        if block_type(media_type) is None:
            raise AttachmentError(f"attachment of type {media_type!r}: Chronicle sends {ACCEPTED}")
    elif isinstance(item, (str, Path)):
        path = Path(item).expanduser()
        name = path.name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise AttachmentError(f"cannot read attachment {path}: {exc.strerror or exc}") from None
        media_type = sniff(data) or SUFFIXES.get(path.suffix.lower(), "")
        if block_type(media_type) is None:
            raise AttachmentError(f"attachment {path}: not a file Chronicle can send; it sends {ACCEPTED}")
    else:
        raise AttachmentError(f"an attachment is a file path or (bytes, media type), not {type(item).__name__}")
    if not data:
        raise AttachmentError(f"attachment {name or media_type} is empty")
    if len(data) > MAX_BYTES:
        raise AttachmentError(f"attachment {name or media_type} is {len(data)} bytes; the Messages API takes at most 32 MB a request")
    found = sniff(data)
    if found != media_type:
        # The Messages API refuses an image or document whose bytes are not what its media type says (a 400 after the
        # input is recorded); a path's kind comes from its bytes first, so only its suffix or a pair's type can be wrong.
        label = name or f"of {len(data)} bytes"
        holds = found or f"none of the kinds Chronicle sends (it begins {data[:8]!r})"
        raise AttachmentError(f"attachment {label} says {media_type} but holds {holds}; Chronicle sends {ACCEPTED}, "
                              "each starting with its format's signature")
    return data, media_type, name


def checked_attachments(items: Sequence[Any] | None) -> list[tuple[bytes, str, str]]:
    """Each attachment read and checked, none stored: (bytes, media type, name) each; AttachmentError for the first bad one."""
    if isinstance(items, (str, PurePath)):  # one path is a sequence of letters: not what was meant
        raise AttachmentError(f"attachments take a list of files: attachments=[{str(items)!r}]")
    if isinstance(items, bytes):
        raise AttachmentError("attachments take a list of files or (bytes, media type) pairs: attachments=[(data, 'application/pdf')]")
    return [read_item(item) for item in items or []]


def store_attachments(store: Any, items: Sequence[Any] | None, clock: Clock = SYSTEM_CLOCK) -> list[dict[str, Any]]:
    """Check all, then store each distinct content once; the reference blocks to record with the input."""
    blocks = []
    for data, media_type, name in checked_attachments(items):
        sha = hashlib.sha256(data).hexdigest()
        aid = attachment_id(sha)
        if not _stored(store, aid):
            attachment = Attachment(id=aid, sha256=sha, media_type=media_type, size=len(data),
                                    data=base64.b64encode(data).decode("ascii"), timestamp=clock.now())
            try:
                store.save(attachment)
            except IntegrityError:
                pass  # stored by someone else in the meantime: the same bytes, by construction
        blocks.append(reference_block(sha, media_type, len(data), name))
    return blocks


def _stored(store: Any, aid: Any) -> bool:
    return bool(store.recorder.select_events(aid, limit=1))


def load_data(store: Any, sha256: str) -> str:
    """The base64 data of stored bytes."""
    attachment = store.repository.get(attachment_id(sha256))
    return attachment.data


def with_attachment_data(request: ModelRequest, store: Any) -> ModelRequest:
    """The request as the provider must send it: every attachment reference replaced by its bytes."""
    if not any(_is_reference(b) for m in request.messages for b in m.content):
        return request
    messages = [
        Message(role=m.role, content=[_with_data(b, store) if _is_reference(b) else b for b in m.content])
        for m in request.messages
    ]
    return request.model_copy(update={"messages": messages})


def _is_reference(block: Any) -> bool:
    return isinstance(block, (ImageBlock, DocumentBlock)) and block.source.get("type") == "attachment"


def _with_data(block: Any, store: Any) -> Any:
    source = {"type": "base64", "media_type": block.source["media_type"], "data": load_data(store, block.source["sha256"])}
    return type(block)(source=source)


def store_result_images(store: Any, blocks: list[dict[str, Any]] | None, clock: Clock = SYSTEM_CLOCK) -> list[dict[str, Any]] | None:
    """A tool result's image blocks (an MCP tool's, base64) stored once by content, like an input's
    attachments, and replaced by reference blocks: the tool call then records the reference, not the
    bytes a second time. An image the Messages API would not take (its type, its size) keeps its data."""
    if not blocks:
        return blocks
    kept = []
    for block in blocks:
        source = block.get("source") if block.get("type") == "image" else None
        if isinstance(source, dict) and source.get("type") == "base64" and source.get("media_type") in IMAGE_TYPES:
            try:
                data = base64.b64decode(source.get("data") or "", validate=True)
            except ValueError:
                data = b""
            if data and len(data) <= MAX_BYTES:
                kept.extend(store_attachments(store, [(data, source["media_type"])], clock))
                continue
        kept.append(block)
    return kept


def result_images(calls: Sequence[Any]) -> list[Any]:
    """The stored images of a batch of tool results, as blocks the model reads right after the
    results (in the same user message, as steering text is): a note naming the call, then the image."""
    from chronicle.domain.content import TextBlock

    shown: list[Any] = []
    for call in calls:
        if call.status != "completed":
            continue
        for block in call.blocks or []:
            source = block.get("source") if block.get("type") == "image" else None
            if isinstance(source, dict) and source.get("type") == "attachment":
                shown.append(TextBlock(text=f"[image returned by {call.name} ({call.tool_use_id})]"))
                shown.append(ImageBlock(source=dict(source)))
    return shown
