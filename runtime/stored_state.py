"""Stored states as bytes: the preset dictionary they are compressed with, and decompression.

The decoding half of runtime/compression.py's `SizedZlib`, apart from it because that class is an
eventsourcing `Compressor`: `chronicle sessions` reads the first stored state over a bare
connection to tell a plain store from an encrypted one, without importing eventsourcing.
"""

from __future__ import annotations

import zlib

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


def decompress(data: bytes) -> bytes:
    """A stored state as the JSON transcoder wrote it: rows that start with `{` were stored as they
    were (small, or written before compression existed); the others are zlib streams."""
    if data[:1] == b"{":
        return data
    if len(data) > 6 and data[1] & FDICT:
        dictid = int.from_bytes(data[2:6], "big")
        if dictid not in DICTIONARIES:
            raise ValueError(f"stored state compressed with an unknown dictionary (Adler-32 {dictid:08x})")
        unpacker = zlib.decompressobj(zdict=DICTIONARIES[dictid])
        return unpacker.decompress(data) + unpacker.flush()
    return zlib.decompress(data)
