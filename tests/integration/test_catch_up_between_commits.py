"""A reader may catch the read models up between any two commits of a running turn (`sessions`, the
viewer, a `history` while a worker runs): what they hold afterwards must be what a rebuild from zero
gives. A storm of processes reading while a worker ran found one that did not: a result kept before
its step closed was read back from the kept table with its keys sorted, so the message's row stored
its content apart from its wire form, where a rebuild (both events in one batch) stored it once."""

from __future__ import annotations

import json

from chronicle.projections import ProjectionEngine, all_projections
from chronicle.runtime.pricing import price
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use


def test_read_models_caught_up_after_every_commit_equal_a_rebuild(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    # bash is neither read-only nor idempotent: its result is kept as soon as it ends, before its step closes
    script.write_text(json.dumps({"agents": {"main": [
        response(tool_use("b1", "bash", command="echo hi"), tool_use("r1", "read_file", path="hello.txt")),
        response(text("done")),
    ]}}))
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=db_url)
    assert ran.returncode == 0, ran.stderr
    store = ChronicleStore(db_url)
    try:
        one_by_one = ProjectionEngine(store, all_projections(pricer=price), batch_size=1)
        one_by_one.catch_up()  # as readers that came between each commit and the next leave them
        incremental = {name: one_by_one.dump(name) for name in one_by_one.projections}
        one_by_one.rebuild()
        assert {name: one_by_one.dump(name) for name in one_by_one.projections} == incremental
    finally:
        store.close()
