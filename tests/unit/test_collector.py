"""The collector held off while a large JSON document is parsed (runtime/collector.py), and the
CLI's start-up policy seen from a program that uses the library, which it must leave alone."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from chronicle.runtime.past_wire import loads


def _document(messages: int = 20_000) -> str:
    return json.dumps([{"role": "user", "content": [{"type": "text", "text": f"message {n}"}]} for n in range(messages)])


def test_parsing_a_large_document_runs_no_collection_and_leaves_the_collector_on():
    text = _document()
    passes: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        parsed = loads(text)
    finally:
        gc.callbacks.remove(seen)
    assert len(parsed) == 20_000 and parsed[-1]["content"][0]["text"] == "message 19999"
    # 60,000 containers: about 85 collections when not held, some of them walking every object the
    # process holds; held, the first allocation after the parse may start one young collection.
    assert len(passes) <= 1, passes
    assert gc.isenabled()


def test_a_program_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    try:
        assert loads(_document(10))[0]["role"] == "user"
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_parse_that_fails_still_turns_the_collector_back_on():
    try:
        loads("[{")
    except ValueError:
        pass
    assert gc.isenabled()


LIBRARY = """
import gc
before = gc.get_threshold()
from chronicle.runtime.collector import start_up_done
from chronicle.runtime.store import open_store_at
store = open_store_at(sys_url)
start_up_done()
print(gc.get_threshold() == before, gc.get_freeze_count())
"""


def test_a_library_program_keeps_its_thresholds_and_nothing_is_frozen(tmp_path):
    """Only the `chronicle` executable changes the collector's settings for its start-up."""
    code = f"sys_url = {str('sqlite:///' + str(tmp_path / 'c.db'))!r}\n" + LIBRARY
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "0"]
