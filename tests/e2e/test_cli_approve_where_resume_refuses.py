"""`chronicle approve`/`deny` of a session that `resume` here would refuse (a tool defined in the script that paused it,
`__main__`): the decision is recorded (exit 0, the same --json rows as the library's), and instead of sending the person to
`chronicle resume` it says, as `resume` does, why the session cannot go on from here and what to do. The advice holds: a
program that defines the tool continues the session."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import cli, json_lines, response, text, tool_use

SCRIPT = '''
import sys
from chronicle import Agent, Chronicle, tool


@tool(requires_approval=True)
def label(row: int) -> str:
    """Label a row."""
    return f"row {row} labelled"


agent = Agent(name="nb", tools=[label], provider="scripted:" + sys.argv[2])
with Chronicle(sys.argv[1]) as app:
    if len(sys.argv) > 4:
        done = app.resume(sys.argv[4])
    else:
        done = app.run_sync(agent, "label row 7", workspace=sys.argv[3])
    print(json.dumps({"session_id": done.session_id, "status": done.status, "text": done.text}))
'''.replace("import sys\n", "import json\nimport sys\n", 1)


GATED = '''
from chronicle import tool


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"
'''


def _script(db_url, workspace, tmp_path, *more: str) -> dict:
    replies = tmp_path / "s.json"
    replies.write_text(json.dumps({"agents": {"nb": [response(tool_use("t1", "label", row=7)), response(text("labelled"))]}}),
                       encoding="utf-8")
    program = tmp_path / "label_rows.py"
    program.write_text(SCRIPT, encoding="utf-8")
    ran = subprocess.run([sys.executable, str(program), db_url, str(replies), str(workspace), *more], capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.splitlines()[-1])


def test_approve_and_deny_say_resume_cannot_go_on_here_and_why(db_url, workspace, tmp_path):
    from chronicle import Chronicle

    sid = _script(db_url, workspace, tmp_path)["session_id"]
    approved = cli("approve", sid, db=db_url)
    assert approved.returncode == 0, approved.stderr  # recorded and valid
    assert "approved label" in approved.stdout and "continue the turn with" not in approved.stdout, approved.stdout
    lines = [line for line in approved.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"note: approved and recorded, but `chronicle resume {sid}"), approved.stderr
    assert "cannot go on from here" in lines[0] and "cannot load tool '__main__:label'" in lines[0], lines[0]
    assert "continue the session from a program that defines it" in lines[0], lines[0]
    refused = cli("resume", sid, db=db_url)  # what the note said
    assert refused.returncode == 2 and "cannot load tool '__main__:label'" in refused.stderr, refused.stderr
    resumed = _script(db_url, workspace, tmp_path, sid)  # the advice holds
    assert (resumed["status"], resumed["text"]) == ("completed", "labelled")

    other = _script(db_url, workspace, tmp_path)["session_id"]
    denied = cli("deny", other, "--json", db=db_url)
    assert denied.returncode == 0, denied.stderr
    rows = json_lines(denied.stdout)
    assert [(r["name"], r["status"]) for r in rows] == [("label", "denied")]  # stdout stays the rows
    assert "note: denied and recorded, but" in denied.stderr and "__main__:label" in denied.stderr, denied.stderr
    third = _script(db_url, workspace, tmp_path)["session_id"]
    with Chronicle(db_url) as app:  # the library's rows are the CLI's
        mine = app.deny(third)
    assert [sorted(r) for r in mine] == [sorted(r) for r in rows] and mine[0]["status"] == "denied"


def test_approve_of_a_session_resume_can_go_on_with_still_points_at_resume(db_url, workspace, tmp_path):
    (workspace / "shop_tools.py").write_text(GATED, encoding="utf-8")  # importable from the workspace: resume loads it
    replies = tmp_path / "s.json"
    replies.write_text(json.dumps({"agents": {"main": [response(tool_use("t1", "refund", order_id="7")), response(text("refunded"))]}}),
                       encoding="utf-8")
    paused = cli("run", "refund 7", "--provider", f"scripted:{replies}", "--workspace", str(workspace), "--tools",
                 "shop_tools:refund", "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    approved = cli("approve", sid, db=db_url)
    assert approved.returncode == 0 and f"continue the turn with `chronicle resume {sid}`" in approved.stdout, approved.stdout
    assert "note:" not in approved.stderr, approved.stderr
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
