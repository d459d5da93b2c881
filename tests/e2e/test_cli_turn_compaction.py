"""One long turn from the command line: its older steps are compacted between model calls, and
`run --json`, `history`, `log`, `audit` and `replay` all show it."""

from __future__ import annotations

import json

from tests.e2e.controls_helpers import history_of, log_of
from tests.helpers import cli, json_lines, response, text, tool_use

BIG = "".join(f"line {i:04d} of a large tool output\n" for i in range(30))


def test_a_long_turn_is_compacted_between_its_model_calls_and_every_view_shows_it(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[compaction]\ncontext_window = 2000\nkeep_recent = 2\n", encoding="utf-8")
    for i in range(10):
        (workspace / f"big{i}.txt").write_text(BIG, encoding="utf-8")
    main = [[response(tool_use(f"tu_{i}", "read_file", path=f"big{i}.txt")) for i in range(10)] + [response(text("read them all"))]]
    script = tmp_path / "s.json"
    summaries = ["read big0-2: 30 lines each", "read big0-5: 30 lines each"]
    script.write_text(json.dumps({"agents": {"main": main}, "summary": summaries}), encoding="utf-8")
    run = cli("run", "read the ten files", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    sid = events[0]["session_id"]
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions and compactions[0]["turn_id"] and compactions[0]["steps_compacted"] > 0
    through = compactions[-1]["steps_compacted"]
    # history: the input, the summary in place of the first steps, then the steps kept, pairs whole.
    history = history_of(sid, db_url)
    first = [b["text"] for b in history[0]["content"]]
    assert first[0] == "read the ten files" and first[1].startswith(f"Summary of the first {through} step(s) of this turn")
    assert len(compactions) == 2 and first[1].endswith("\nread big0-5: 30 lines each")  # the script's summaries, in order
    uses = [b["id"] for m in history for b in m["content"] if b["type"] == "tool_use"]
    assert uses == [f"tu_{i}" for i in range(through, 10)]
    # log keeps every step, and names the compaction; audit lists it.
    log = log_of(sid, db_url)
    assert sum(1 for e in log if e["event"] == "ModelResponded") == 11
    assert [e["data"]["through_step"] for e in log if e["event"] == "IterationsCompacted"] == [c["steps_compacted"] for c in compactions]
    audit = cli("audit", "--session", sid, "--json", db=db_url)
    assert audit.returncode == 0, audit.stderr
    assert sum(1 for row in json_lines(audit.stdout) if row.get("kind") == "iterations_compacted") == len(compactions)
    replayed = cli("replay", sid, db=db_url)
    assert replayed.returncode == 0 and replayed.stdout.startswith("identical: 1 turn(s), 11 model call(s)"), replayed.stdout + replayed.stderr
