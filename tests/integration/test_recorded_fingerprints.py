"""What the loop records as each step's fingerprint is the fingerprint of the request the model got.

The loop builds requests incrementally; replay recomputes fingerprints from scratch. They must agree.
"""

from __future__ import annotations

from chronicle.runtime.model_call import fingerprint
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def test_every_recorded_fingerprint_is_the_full_fingerprint_of_the_request_sent(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        [
            response(text("looking"), tool_use("a", "read_file", path="hello.txt")),
            response(tool_use("b", "read_file", path="missing.txt"), tool_use("c", "list_dir", path=".")),
            response(text("first done")),
        ],
        [
            response(tool_use("d", "read_file", path="hello.txt")),
            response(text("second done")),
        ],
    ])
    assert h.run("first").status == "completed"
    assert h.run("second").status == "completed"
    turns = h.store.head_turns(h.store.session(h.session_id))
    recorded = [step["fingerprint"] for turn in turns for step in turn.steps]
    assert recorded == [fingerprint(r) for r in h.provider.requests]
    assert len(set(recorded)) == 5
