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

#: Preset dictionary: the fragments every stored state repeats (transcoder wrappers, topics, field
#: names of the stored vocabulary). Short states compress to a fraction with it and to nearly
#: nothing without. Never edit it: streams name their dictionary by its Adler-32 (zlib's DICTID),
#: so a new dictionary is added to DICTIONARIES and old rows keep decoding with the old one.
ZDICT = (
    b'"error":null,"status":null,"retry_after_s":null,"kind":"prompt","actor":null,"reason":'
    b'"flags":{"read_only":true,"requires_approval":false,"idempotent":true,"parallel_safe":true},"input":{'
    b'"name":"read_file","name":"bash","name":"write_file","name":"edit_file","name":"list_dir","name":"grep",'
    b'"spec":{"name":"main","description":"","instructions":"","provider":"","model":"claude-","tools":['
    b'"parent_session_id":null,"parent_tool_call_id":null,"forked_from":null,"head":[],"class_version":2}'
    b'"input_id":"","input_text":"","text":"","number":1,"agent":"main","final_text":"'
    b'"effects":null,"ends_turn":false,"blocks":null,"attempt":1}'
    b'"content":[{"type":"text","text":"'
    b'{"type":"tool_use","id":"toolu_","name":"","input":{"path":"'
    b'"stop_reason":"tool_use","stop_reason":"end_turn","usage":{"input_tokens":,"output_tokens":'
    b',"cache_creation_input_tokens":,"cache_read_input_tokens":},"model":"claude-sonnet-4-5"},'
    b'"fingerprint":"","request_delta":{"model":"claude-sonnet-4-5","max_tokens":8192,"message_count":'
    b'},"latency_ms":,"attempts":1}'
    b'"blocks":[{"type":"tool_result","tool_use_id":"toolu_","content":"","is_error":false}]}'
    b'"output":"","is_error":false,"duration_ms":'
    b'"originator_topic":"chronicle.domain.session:Session",'
    b'"originator_topic":"chronicle.domain.turn:Turn",'
    b'"session_id":{"_type_":"uuid_hex","_data_":"'
    b'"turn_id":{"_type_":"uuid_hex","_data_":"'
    b'"originator_topic":"chronicle.domain.tool_call:ToolCall","session_id":{"_type_":"uuid_hex","_data_":"'
    b'"},"turn_id":{"_type_":"uuid_hex","_data_":"'
    b'"},"step":0,"tool_use_id":"toolu_'
    b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-'
)

#: Every dictionary a stored stream may name, by its Adler-32.
DICTIONARIES = {zlib.adler32(ZDICT): ZDICT}
#: zlib's FLG bit saying a DICTID follows the two header bytes.
FDICT = 0x20


class SizedZlib(Compressor):
    def compress(self, data: bytes) -> bytes:
        if len(data) < MIN_BYTES:
            return data
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, WINDOW_BITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, ZDICT)
        packed = packer.compress(data) + packer.flush()
        return packed if len(packed) < len(data) else data

    def decompress(self, data: bytes) -> bytes:
        if data[:1] == b"{":
            return data
        if len(data) > 6 and data[1] & FDICT:
            dictid = int.from_bytes(data[2:6], "big")
            if dictid not in DICTIONARIES:
                raise ValueError(f"stored state compressed with an unknown dictionary (Adler-32 {dictid:08x})")
            unpacker = zlib.decompressobj(zdict=DICTIONARIES[dictid])
            return unpacker.decompress(data) + unpacker.flush()
        return zlib.decompress(data)


COMPRESSOR_TOPIC = f"{SizedZlib.__module__}:{SizedZlib.__qualname__}"
