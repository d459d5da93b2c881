"""`chronicle forget`: a session tree's content erased by destroying its data key (issue 13).

Shown on both backends through the CLI: the forgotten session's plaintext (events, snapshots, read
models) is absent from the database file and from `pg_dump`, the other session reads as before,
`verify` still passes and `audit` shows the erasure."""

from __future__ import annotations

import base64
import os

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.store_dump import dump_store, holds

REGISTRY = """
[agents.researcher]
description = "Reads files and reports"
"""


def key_env() -> dict[str, str]:
    return {"CHRONICLE_CIPHER_KEY": base64.b64encode(os.urandom(32)).decode()}


def run(db_url, workspace, tmp_path, name, main, env, **agents):
    script = write_script(tmp_path / f"{name}.json", main, **agents)
    done = cli("run", f"prompt of {name}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
               db=db_url, env=env)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)


def test_forget_erases_one_session_tree_and_leaves_the_rest_and_the_chain_intact(db_url, workspace, tmp_path):
    env = key_env()
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    (workspace / "gone.txt").write_text("FILE-CONTENT-OF-FORGOTTEN\n", encoding="utf-8")
    erased = run(db_url, workspace, tmp_path, "ERASE-ME", [
        response(tool_use("r", "read_file", path="gone.txt"),
                 tool_use("d", "delegate", tasks=[{"agent": "researcher", "task": "CHILD-TASK-OF-FORGOTTEN"}])),
        response(text("MODEL-TEXT-OF-FORGOTTEN")),
    ], env, researcher=[response(text("CHILD-ANSWER-OF-FORGOTTEN"))])
    kept = run(db_url, workspace, tmp_path, "KEEP-ME", [response(text("MODEL-TEXT-OF-KEPT"))], env)
    sid, kept_sid = erased[0]["session_id"], kept[0]["session_id"]
    assert cli("history", sid, db=db_url, env=env).returncode == 0
    gone = ("ERASE-ME", "FILE-CONTENT-OF-FORGOTTEN", "CHILD-TASK-OF-FORGOTTEN", "CHILD-ANSWER-OF-FORGOTTEN", "MODEL-TEXT-OF-FORGOTTEN")
    # The read models hold plaintext (README): before forget, the dump does show these, so the check below can fail.
    assert cli("sessions", db=db_url, env=env).returncode == 0  # read models caught up
    before = dump_store(db_url)
    assert [m for m in ("ERASE-ME", "KEEP-ME") if not holds(before, m)] == []

    refused = cli("forget", sid, db=db_url, env=env)
    assert refused.returncode == 2 and "add --yes" in refused.stderr
    done = cli("forget", sid, "--yes", "--json", db=db_url, env=env)
    assert done.returncode == 0, done.stderr
    result = json_lines(done.stdout)[0]
    assert result["tree_id"] == sid and len(result["session_ids"]) == 2  # the session and its sub-agent

    dump = dump_store(db_url)
    for marker in gone:
        assert not holds(dump, marker), f"{marker} is still in the store"
    assert holds(dump, "KEEP-ME")  # the read models were rebuilt with the other session in them

    verify = cli("verify", db=db_url, env=env)
    assert verify.returncode == 0 and verify.stdout.startswith("verified the whole log"), verify.stdout + verify.stderr
    for named in (sid, sid[:8]):  # the full id, and the prefix `audit` shows on the forget row
        history = cli("history", named, db=db_url, env=env)
        assert history.returncode == 1 and "was forgotten" in history.stderr, (named, history.stderr)
    assert "MODEL-TEXT-OF-KEPT" in cli("history", kept_sid, db=db_url, env=env).stdout
    listed = [s["session_id"] for s in json_lines(cli("sessions", "--json", db=db_url, env=env).stdout)]
    assert listed == [kept_sid]
    audit = json_lines(cli("audit", "--json", db=db_url, env=env).stdout)
    erasures = [row for row in audit if row["kind"] == "forget"]
    assert {row["session_id"] for row in erasures} == set(result["session_ids"])
    assert all(row["detail"]["actor"] for row in erasures)
    # Nothing more can be written to the erased tree.
    assert cli("run", "again", "--session", sid, "--provider", "scripted:x", db=db_url, env=env).returncode != 0


def test_forget_needs_encryption_at_rest(sqlite_url, workspace, tmp_path):
    events = run(sqlite_url, workspace, tmp_path, "PLAIN", [response(text("ok"))], {})
    refused = cli("forget", events[0]["session_id"], "--yes", db=sqlite_url)
    assert refused.returncode == 2 and "needs encryption at rest" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_forgotten_job_leaves_no_prompt_and_no_error_behind(sqlite_url, workspace, tmp_path):
    env = key_env()
    script = write_script(tmp_path / "s.json", [response(text("ok"))])
    submitted = cli("jobs", "submit", "JOB-PROMPT-OF-FORGOTTEN", "--provider", f"scripted:{script}", "--workspace", str(workspace),
                    "--json", db=sqlite_url, env=env)
    assert submitted.returncode == 0, submitted.stderr
    job = json_lines(submitted.stdout)[0]["job_id"]
    assert cli("forget", job, "--yes", db=sqlite_url, env=env).returncode == 0
    listed = cli("jobs", "--json", db=sqlite_url, env=env)
    assert listed.returncode == 0 and listed.stdout.strip() == "", listed.stdout + listed.stderr
    assert cli("doctor", db=sqlite_url, env=env).returncode == 0
    assert not holds(dump_store(sqlite_url), "JOB-PROMPT-OF-FORGOTTEN")


def test_an_imported_fork_is_forgotten_with_the_turns_it_inherited(db_url, workspace, tmp_path, request):
    """A fork is in its origin's tree: the turns it inherits travel under that tree's key, so
    forgetting the fork where it was imported erases them too, as forgetting it at home would."""
    from tests.integration.test_bundle import other_store

    env = key_env()
    sid = run(db_url, workspace, tmp_path, "PARENT", [[response(text("INHERITED-ANSWER"))]], env)[0]["session_id"]
    fork = cli("fork", sid, "--at", "1", db=db_url, env=env).stdout.strip()
    bundle = tmp_path / "fork.json"
    assert cli("export", fork, "-o", str(bundle), db=db_url, env=env).returncode == 0
    target = other_store(db_url, tmp_path, request, "target")
    assert cli("import", str(bundle), db=target, env=env).returncode == 0
    assert "INHERITED-ANSWER" in cli("history", fork, db=target, env=env).stdout
    done = cli("forget", fork, "--yes", "--json", db=target, env=env)
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[0]["tree_id"] == sid and json_lines(done.stdout)[0]["session_ids"] == [fork]
    assert not holds(dump_store(target), "INHERITED-ANSWER")
    history = cli("history", fork, db=target, env=env)
    assert history.returncode == 1 and "was forgotten" in history.stderr
    assert cli("verify", db=target, env=env).returncode == 0
    assert "INHERITED-ANSWER" in cli("history", sid, db=db_url, env=env).stdout  # the source keeps it


def test_forget_erases_the_trees_task_board_posted_failed_and_reflected(db_url, workspace, tmp_path, monkeypatch):
    """Every DelegatedTask of the tree is sealed with its key (runtime/shredding.py): a task posted on
    the board and never claimed, one claimed and failed with its reflection; the board index entries
    that list them name a task id and nothing else."""
    from uuid import UUID

    from chronicle.domain.ids import board_index_id
    from chronicle.runtime.store import ChronicleStore

    env = key_env()
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    sid = run(db_url, workspace, tmp_path, "ERASE-ME", [[response(text("Ready."))]], env)[0]["session_id"]
    claimed = cli("tasks", "add", sid, "POSTED-TASK-OF-FORGOTTEN", "--agent", "researcher", "--json", db=db_url, env=env)
    assert claimed.returncode == 0, claimed.stderr
    tid = json_lines(claimed.stdout)[0]["task_id"]
    assert cli("tasks", "add", sid, "IDLE-TASK-OF-FORGOTTEN", db=db_url, env=env).returncode == 0
    items = [{"agent": "researcher", "task": "POSTED-TASK-OF-FORGOTTEN", "task_id": tid}]
    script = write_script(tmp_path / "second.json", [[], [response(tool_use("d", "delegate", tasks=items)), response(text("ok"))]],
                          researcher=[response(tool_use("c", "task_complete", status="failed", summary="FAILURE-OF-FORGOTTEN"))])
    second = cli("run", "go", "--session", sid, "--provider", f"scripted:{script}", "--workspace", str(workspace),
                 db=db_url, env=env)
    assert second.returncode == 0, second.stderr
    rows = json_lines(cli("tasks", sid, "--json", db=db_url, env=env).stdout)
    assert [r["status"] for r in rows] == ["failed", "pending"] and rows[0]["reflection"]
    gone = ("POSTED-TASK-OF-FORGOTTEN", "IDLE-TASK-OF-FORGOTTEN", "FAILURE-OF-FORGOTTEN")
    assert cli("sessions", db=db_url, env=env).returncode == 0  # read models caught up: they hold plaintext until forget
    before = dump_store(db_url)
    assert [m for m in gone if not holds(before, m)] == [], "the check below could not fail"
    assert cli("forget", sid, "--yes", db=db_url, env=env).returncode == 0
    dump = dump_store(db_url)
    for marker in gone:
        assert not holds(dump, marker), f"{marker} is still in the store"
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", env["CHRONICLE_CIPHER_KEY"])
    store = ChronicleStore(db_url)
    entries = store.recorder.select_events(board_index_id(UUID(sid)))
    assert len(entries) == 2
    fields = [set(vars(store.mapper.to_domain_event(e))) - {"originator_id", "originator_version", "timestamp"} for e in entries]
    assert fields == [{"task_id"}, {"task_id"}]


def test_an_export_made_before_a_forget_is_refused_where_it_was_forgotten_but_not_in_another_store(sqlite_url, workspace, tmp_path):
    """What docs/trust.md says of exports and forget: the store that forgot a tree keeps its key's row, emptied, so the
    earlier bundle does not bring the tree back there; the bundle itself still carries the data key wrapped by the
    master key, so a new store opened with the same CHRONICLE_CIPHER_KEY reads it again."""
    env = key_env()
    sid = run(sqlite_url, workspace, tmp_path, "EXPORTED", [response(text("EXPORTED-ANSWER"))], env)[0]["session_id"]
    bundle = tmp_path / "before.json"
    assert cli("export", sid, "-o", str(bundle), db=sqlite_url, env=env).returncode == 0
    assert cli("forget", sid, "--yes", db=sqlite_url, env=env).returncode == 0
    again = cli("import", str(bundle), db=sqlite_url, env=env)
    assert again.returncode == 1 and "was forgotten" in again.stderr and "nothing recorded" in again.stderr, again.stderr
    assert not holds(dump_store(sqlite_url), "EXPORTED-ANSWER")
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert cli("import", str(bundle), db=elsewhere, env=env).returncode == 0
    assert "EXPORTED-ANSWER" in cli("history", sid, db=elsewhere, env=env).stdout
