"""File contents as exact bytes: what the file tools read, write and record for undo.

Reading with universal newlines turned CRLF into LF, so an edit rewrote every line ending and
the recorded "before" was not the file that had been there: undo could not put it back. Here a
file is decoded strictly as UTF-8 from its bytes (CRLF, a BOM, a missing final newline all
survive), and one rule says what is binary, for every tool: a NUL byte in its first 8 KiB, as
git and grep decide. Text that is not UTF-8 can be read (shown with U+FFFD) but not changed,
because its bytes could not be recorded for undo.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from .base import ToolError

SNIFF_BYTES = 8192


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:SNIFF_BYTES]


def read_for_display(path: Path, shown: str) -> str:
    data = path.read_bytes()
    if is_binary(data):
        raise ToolError(f"{shown} is a binary file; the file tools handle text only")
    return data.decode("utf-8", errors="replace")


def read_exact(path: Path, shown: str, verb: str) -> str:
    """The file's text exactly as stored, or a refusal to `verb` a file whose bytes text cannot hold."""
    data = path.read_bytes()
    if is_binary(data):
        raise ToolError(f"{shown} is a binary file; {verb} handles text only and leaves it untouched")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text; {verb} changes UTF-8 files only (undo could not restore other bytes)"
        ) from None


def current_text(path: Path) -> str | None:
    """What undo compares with: the file's exact text, None if absent, "" sentinel-free otherwise."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" + data.decode("utf-8", errors="replace")  # never equal to recorded text


def write_exact(path: Path, text: str) -> None:
    """Replace the directory entry at `path` with a new file holding exactly `text` as UTF-8.

    Written beside it and renamed over it: a crash leaves the old or the new file, never half of
    one, and a hard link that shares the old file's inode keeps its own content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name[:40]}.{secrets.token_hex(6)}.chronicle-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any new file
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        if path.exists() and not path.is_symlink():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
