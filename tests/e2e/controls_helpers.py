"""A `chronicle` process running in the background, read line by line as it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

from tests import processes
from tests.helpers import cli


class Background:
    def __init__(self, *args: str, db: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CHRONICLE_DB")}
        env.update(COLUMNS="200", CHRONICLE_DB=db)
        self.proc = processes.start(
            [sys.executable, "-m", "chronicle.runtime.cli", *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.events: list[dict[str, Any]] = []

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        """Read JSON lines until one matches (the process writes and flushes one per live event)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                raise AssertionError(f"process ended before the expected event; stderr: {self.proc.stderr.read()}")  # type: ignore[union-attr]
            event = json.loads(line)
            self.events.append(event)
            if match(event):
                return event
        raise AssertionError("timed out waiting for an event")

    def finish(self, timeout: float = 60) -> int:
        out, err = self.proc.communicate(timeout=timeout)
        self.stderr = err
        self.events.extend(json.loads(line) for line in out.splitlines() if line.strip())
        return self.proc.returncode


def log_of(session_id: str, db: str) -> list[dict[str, Any]]:
    run = cli("log", session_id, "--json", db=db)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def history_of(session_id: str, db: str) -> list[dict[str, Any]]:
    run = cli("history", session_id, "--json", db=db)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def tool_events(log: list[dict[str, Any]], tool_use_id: str) -> list[str]:
    return [e["event"] for e in log if e["aggregate"] == "tool_call" and e["data"].get("tool_use_id") == tool_use_id]
