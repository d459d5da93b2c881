"""A real terminal (tmux) that the chat and pager tests type into and read back as a person would."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path


class Terminal:
    def __init__(self, command: str) -> None:
        self.socket = f"chronicle-test-{uuid.uuid4().hex[:8]}"
        # The shell traps (not ignores) SIGINT so that Ctrl-C reaches only the chat, which survives it.
        wrapped = f"trap 'true' INT; {command}; echo EXITED=$?; sleep 60"
        self.tmux("new-session", "-d", "-s", "chat", "-x", "180", "-y", "60", f"sh -c {shlex.quote(wrapped)}")

    @classmethod
    def chat(cls, db_url: str, script: Path, workspace: Path) -> Terminal:
        """`chronicle chat` on a scripted provider, in a 180-column terminal."""
        return cls(" ".join(shlex.quote(part) for part in [
            "env", f"CHRONICLE_DB={db_url}", "COLUMNS=180", sys.executable, "-m", "chronicle.runtime.cli", "chat",
            "--provider", f"scripted:{script}", "--workspace", str(workspace),
        ]))

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)
        assert done.returncode == 0, f"tmux {args[0]} failed: {done.stderr}"
        return done.stdout

    def record(self, path: Path) -> None:
        """From now on, append all the chat writes to the terminal (escape sequences and all) to `path`."""
        self.tmux("pipe-pane", "-O", "-t", "chat", f"cat >> {shlex.quote(str(path))}")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-500", "-t", "chat")

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", line)
        self.tmux("send-keys", "-t", "chat", "Enter")

    def key(self, key: str) -> None:
        self.tmux("send-keys", "-t", "chat", key)

    def wait_for(self, needle: str, count: int = 1, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(needle) >= count:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} (x{count}) never appeared; the screen shows:\n{self.screen()}")

    def wait_for_after(self, anchor: str, needle: str, timeout: float = 30) -> str:
        """Wait until `needle` shows below the last `anchor` (the prompt back after an answer). Counting
        prompts on the whole screen was not enough: while the spinner and the steering editor start
        together, the line of the first prompt can be drawn over."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            at = screen.rfind(anchor)
            if at >= 0 and needle in screen[at + len(anchor):]:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never appeared after {anchor!r}; the screen shows:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
