"""Stored states compressed when that pays, and old uncompressed rows still read as they are.

eventsourcing's mapper compresses each event's (and snapshot's) JSON before the cipher encrypts
it, and decompresses after the cipher decrypts it, so the hash chain's digests cover the bytes as
stored and encryption at rest is unchanged. A state is compressed only when it is large enough to
gain and only if the result is smaller, with a preset dictionary of the stored vocabulary (field
names, the transcoder's wrappers, topics), which is what makes short events shrink. Decompression
tells the two apart by the first byte: the JSON transcoder always writes an object, `{`, which a
zlib stream never starts with (its header's first byte is 0x78 for the window sizes zlib writes),
so rows written before compression existed, or left small, are read unchanged.
"""

from __future__ import annotations

import zlib

from eventsourcing.persistence import Compressor

# The dictionary and decompression live in stored_state.py, which `sessions` reads without eventsourcing.
from .stored_state import DICTIONARIES, ZDICT, decompress

__all__ = ["COMPRESSOR_TOPIC", "DICTIONARIES", "MIN_BYTES", "ZDICT", "SizedZlib"]

#: Below this many bytes a state is stored as it is: even with the preset dictionary the gain is
#: a few bytes, and reading it back would cost a decompression for nothing.
MIN_BYTES = 64
#: zlib level 1: most of the gain on JSON, at a third of level 6's CPU per event written.
LEVEL = 1
#: A 4 KB window (the dictionary is 1.6 KB) and a small hash table: the same sizes as zlib's
#: defaults on event-sized states, at a sixth of the CPU (the default 32 KB window costs ~300 µs
#: to set up per call with a dictionary, this ~50 µs). Any zlib reader takes any window size.
WINDOW_BITS = 12
MEM_LEVEL = 4


class SizedZlib(Compressor):
    def compress(self, data: bytes) -> bytes:
        if len(data) < MIN_BYTES:
            return data
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, WINDOW_BITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, ZDICT)
        packed = packer.compress(data) + packer.flush()
        return packed if len(packed) < len(data) else data

    def decompress(self, data: bytes) -> bytes:
        return decompress(data)


COMPRESSOR_TOPIC = f"{SizedZlib.__module__}:{SizedZlib.__qualname__}"
