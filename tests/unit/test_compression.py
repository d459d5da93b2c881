"""Stored states: compressed with the preset dictionary when that pays, read back whatever their age."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from chronicle.runtime.compression import MIN_BYTES, SizedZlib


def state(text: str) -> bytes:
    return json.dumps({"timestamp": {"_type_": "datetime_iso", "_data_": "2026-11-23T20:47:55+00:00"}, "output": text}).encode()


def test_a_large_state_is_stored_smaller_and_read_back_exactly():
    data = state("The record you asked for holds the usual fields. " * 20)
    packed = SizedZlib().compress(data)
    assert len(packed) < len(data) // 4 and not packed.startswith(b"{")
    assert SizedZlib().decompress(packed) == data


def test_a_short_state_shrinks_with_the_dictionary_of_field_names():
    data = state("ok")
    assert len(data) >= MIN_BYTES
    packed = SizedZlib().compress(data)
    assert len(packed) < len(data) * 0.7
    assert SizedZlib().decompress(packed) == data


def test_a_tiny_state_and_one_that_would_grow_are_stored_as_they_are():
    assert SizedZlib().compress(b'{"a":1}') == b'{"a":1}'
    noise = b"{" + random.Random(0).randbytes(400)
    assert SizedZlib().compress(noise) == noise


@pytest.mark.parametrize("legacy", [state("written before compression"), zlib.compress(state("plain zlib, no dictionary"))])
def test_rows_written_before_the_dictionary_or_before_compression_still_read(legacy):
    expected = legacy if legacy.startswith(b"{") else zlib.decompress(legacy)
    assert SizedZlib().decompress(legacy) == expected


def test_a_stream_naming_an_unknown_dictionary_is_an_error_not_garbage():
    packer = zlib.compressobj(1, zlib.DEFLATED, 12, 4, zlib.Z_DEFAULT_STRATEGY, b"some other dictionary")
    packed = packer.compress(state("x" * 300)) + packer.flush()
    with pytest.raises(ValueError, match="dictionary"):
        SizedZlib().decompress(packed)


@pytest.mark.parametrize("window", [9, 12, 15])
def test_a_dictionary_stream_reads_back_whatever_window_its_writer_used(window):
    from chronicle.runtime.stored_state import ZDICT

    data = state("far back " + "".join(chr(97 + i % 26) * (i % 7 + 1) for i in range(4000)) + " far back")
    packer = zlib.compressobj(6, zlib.DEFLATED, window, 8, zlib.Z_DEFAULT_STRATEGY, ZDICT)
    assert SizedZlib().decompress(packer.compress(data) + packer.flush()) == data


@pytest.mark.parametrize("damage", ["truncated", "flipped", "trailer"])
def test_a_damaged_dictionary_stream_never_reads_as_the_state_it_was(damage):
    data = state("The record you asked for holds the usual fields. " * 20)
    packed = bytearray(SizedZlib().compress(data))
    if damage == "truncated":
        packed = packed[:-9]
    elif damage == "flipped":
        packed[len(packed) // 2] ^= 0x10
    else:
        packed[-1] ^= 0x01
    try:
        read = SizedZlib().decompress(bytes(packed))
    except zlib.error:
        return
    assert read != data  # a truncated stream reads short, and its JSON then fails to decode
