"""The programs in examples/ run as a user runs them, against their scripted models, on both backends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, db_url: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CHRONICLE_PROVIDER")}
    env.update(CHRONICLE_DB=db_url, CHRONICLE_WORKSPACE=str(workspace))
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, cwd=workspace, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_custom_tools_pauses_for_the_refund_approves_it_in_code_and_audits_it(db_url, ws):
    out = run_example("custom_tools.py", db_url, ws).stdout
    assert "awaiting_approval (exit code 3)" in out
    assert "approval needed: refund" in out and "resumed: completed" in out
    # One call waits, so one line names it (not also the turn's own ApprovalRequested, which names no tool).
    assert [line for line in out.splitlines() if line.startswith("approval needed:")] == ["approval needed: refund — approving"]
    assert "answer: Done: 20 euros are on their way back for order A-42." in out
    assert "audit: approval   refund" in out and "approved" in out
    assert "why refund: after reading 'order A-42: delivered, box damaged', it called refund(" in out


def test_sub_agents_delegates_to_two_agents_with_their_own_tools_and_rolls_their_cost_up(db_url, ws):
    out = run_example("sub_agents.py", db_url, ws).stdout
    assert "answer: notes.md has 12 words in 3 sentences" in out
    assert "lead: idle, 1 turn(s)" in out
    assert "↳ researcher: " in out and "↳ reviewer: " in out
    assert "tokens with sub-agents: 2030 in, 215 out" in out  # lead 1100 + researcher 580 + reviewer 350


def test_time_travel_undoes_a_file_change_forks_and_replays_identically(db_url, ws):
    out = run_example("time_travel.py", db_url, ws).stdout
    assert "after two turns: '# Notes\\n- undo puts files back\\n'" in out
    assert "undo: 1 turn(s)" in out and "now '# Notes\\n'" in out
    assert "history after redo: 8 message(s)" in out
    assert "Added the line about undo. 8 message(s)" in out  # the fork: turn 1 inherited, plus its own turn 2
    assert "the original still has 8 message(s)" in out
    assert "replay: identical" in out


def test_release_desk_shows_skills_guardrails_the_board_a_heartbeat_a_job_and_self_repair(db_url, ws):
    out = run_example("release_desk.py", db_url, ws).stdout
    assert "skills: release-notes (on_demand)" in out
    assert "notes: completed: Release notes: v2 starts faster; the old config held the password [redacted]." in out
    assert "read_file, as recorded and read: v2: faster startup; password=[redacted] in the old config" in out
    assert "guardrail: redact modified the final" in out and "hunter2" not in out
    assert "board: counter failed: Count the widgets mentioned in CHANGES.md; reflection: turn failed after 1 model call(s)" in out
    assert "heartbeat: completed: CHANGES.md lists v2 only; add the v2.1 entry." in out
    assert "job: completed: One entry: v2, faster startup." in out
    assert "self-repair: 0 finding(s)" in out
    assert "tokens with sub-agents: 2600 in, 125 out" in out  # desk 2500 + counter 100 (heartbeat and job are sessions of their own)
