"""A tree of agents, each with its own tools: a lead delegates to a researcher and a reviewer.

    python examples/sub_agents.py

Sub-agents are Agents too. The lead gets `delegate` and `list_agents` because it has agents to
ask and depth to spare (max_depth=1); each child runs in its own session, with its own tools
and iteration limit, reports with `task_complete`, and its cost rolls up to the lead's.
"""

from __future__ import annotations

from _setup import provider, workspace

from chronicle import Agent, Chronicle, tool

NOTES = "Chronicle records every decision. Every decision is an event. Events can be replayed.\n"


@tool(read_only=True, idempotent=True, parallel_safe=True)
def word_count(text: str) -> dict:
    """Count the words and sentences of a text.

    Args:
        text: The text to measure.
    """
    return {"words": len(text.split()), "sentences": text.count(".")}


@tool(read_only=True)
def repeated_words(text: str, min_count: int = 2) -> list:
    """List the words a text repeats.

    Args:
        text: The text to check.
        min_count: Report words used at least this often.
    """
    words = [w.strip(".,").lower() for w in text.split()]
    return sorted({w for w in words if words.count(w) >= min_count})


researcher = Agent(name="researcher", description="Reads files and measures them",
                   instructions="Read what you are asked about, measure it, report with task_complete.",
                   tools=["read_file", word_count], max_iterations=5)
reviewer = Agent(name="reviewer", description="Reviews wording",
                 instructions="Point out repetition; report with task_complete.", tools=["read_file", repeated_words])
lead = Agent(name="lead", instructions="You lead a small team: delegate reading and reviewing, then answer.",
             tools=["read_file"], agents=[researcher, reviewer], max_depth=1, provider=provider("sub_agents.json"))


def main() -> None:
    ws = workspace()
    (ws / "notes.md").write_text(NOTES, encoding="utf-8")
    app = Chronicle()
    result = app.run_sync(lead, "How long is notes.md, and how could its wording improve?", workspace=ws)
    print(f"session {result.session_id}: {result.status}")
    print(f"answer: {result.text}")
    tree = [s for s in app.sessions() if s["session_id"] == result.session_id or s["parent_session_id"] == result.session_id]
    for row in tree:
        indent = "  ↳ " if row["parent_session_id"] else ""
        print(f"{indent}{row['agent']}: {row['status']}, {row['turns']} turn(s)")
    total = next(o for o in app.cost(result.session_id) if o["scope"] == "total")
    print(f"tokens with sub-agents: {total['input_tokens']} in, {total['output_tokens']} out")
    app.close()


if __name__ == "__main__":
    main()
