"""An agent that works with skills, checks and a team, and on its own: the seeds' features from Python.

    python examples/release_desk.py

The desk loads a workspace skill (skills/NAME/SKILL.md) on demand, its guardrail redacts a password
from what it reads and answers, and its limits (the cost guard) are recorded on the session. It
delegates counting to a sub-agent with one model call to spare, which runs out: the task board shows
the failed task and the reflection later sub-agents are given. Then a heartbeat routine reads
HEARTBEAT.md, a background job is run here (`resume` does what a worker would), and self-repair
looks for stuck turns and broken tools. Every one of those decisions is in the audit trail.
"""

from __future__ import annotations

from _setup import provider, workspace

from chronicle import Agent, Chronicle, Guardrail, Routine

SKILL = """---
name: release-notes
description: Write release notes from CHANGES.md
when_to_use: the user asks for release notes
---
1. Read CHANGES.md. 2. One line per change, newest first.
"""


def redact(text: str, where: str) -> str | None:
    """A guardrail: None passes the text, a string replaces it (every change is recorded)."""
    return text.replace("hunter2", "[redacted]") if "hunter2" in text else None


counter = Agent(name="counter", description="Counts things in files", tools=["read_file"], max_iterations=1)
desk = Agent(name="desk", instructions="You write release notes; delegate counting to the counter.",
             tools=["read_file"], agents=[counter], guardrails=[Guardrail("redact", redact)],
             limits={"budget_usd": 1.0, "max_tool_calls": 10}, provider=provider("release_desk.json"))
clerk = Agent(name="clerk", instructions="Summarise files briefly.", tools=["read_file"], provider=provider("release_desk.json"))


def main() -> None:
    ws = workspace()
    (ws / "skills" / "release-notes").mkdir(parents=True, exist_ok=True)
    (ws / "skills" / "release-notes" / "SKILL.md").write_text(SKILL, encoding="utf-8")
    (ws / "CHANGES.md").write_text("v2: faster startup; password=hunter2 in the old config\n", encoding="utf-8")
    (ws / "HEARTBEAT.md").write_text("# Checklist\n- is CHANGES.md up to date?\n", encoding="utf-8")
    app = Chronicle()
    print("skills:", ", ".join(f"{s['name']} ({s['mode']})" for s in app.skills(workspace=ws)))

    notes = app.run_sync(desk, "Write the release notes.", workspace=ws)
    print(f"notes: {notes.status}: {notes.text}")
    results = [b for m in app.history(notes.session_id) if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    read = results[-1]  # read_file's, after load_skill's
    print(f"read_file, as recorded and read: {read['content'].strip()}")
    checks = [r for r in app.audit(session=notes.session_id) if r["kind"] == "guardrail"]
    print("guardrail:", ", ".join(f"{r['name']} {r['status']} the {r['detail']['where']}" for r in checks))

    counted = app.run_sync(desk, "How many widgets does CHANGES.md mention?", session=notes.session_id)
    print(f"counting: {counted.status}: {counted.text}")
    for task in app.tasks(notes.session_id):
        reflection = task["reflection"] or {}
        print(f"board: {task['agent']} {task['status']}: {task['task']}; reflection: {reflection.get('what_happened')}")

    beat = app.run_routine(Routine("heartbeat", heartbeat=True), workspace=ws, agent=desk)
    print(f"heartbeat: {beat['status']}: {beat['summary']}")

    job = app.submit_job(clerk, "Summarise CHANGES.md.", workspace=ws)
    app.resume(job["job_id"])  # what any `chronicle worker` would do with it
    done = app.job(job["job_id"])
    print(f"job: {done['status']}: {done['final_text']}")

    repairs = app.repairs(check=True)
    print(f"self-repair: {len(repairs)} finding(s)")
    total = next(o for o in app.cost(notes.session_id) if o["scope"] == "total")
    print(f"tokens with sub-agents: {total['input_tokens']} in, {total['output_tokens']} out")
    app.close()


if __name__ == "__main__":
    main()
