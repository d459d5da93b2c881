"""bash and grep end when they must and hold bounded memory, whatever the command or pattern (issue 17)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from chronicle.runtime.tools import BUILTIN_TOOLS
from chronicle.runtime.tools.base import MAX_OUTPUT_CHARS, ToolContext, ToolError
from chronicle.runtime.tools.shell import KEEP_BYTES


async def run_tool(ctx: ToolContext, name: str, **args):  # type: ignore[no-untyped-def]
    tool = BUILTIN_TOOLS[name]()
    return await tool.run(tool.parse(args), ctx)


def test_bash_environment_is_an_allow_list_plus_what_the_operator_names(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-shown-0123456789")
    monkeypatch.setenv("CHRONICLE_DB", "postgresql://u:hunter2hunter2@localhost/db")
    monkeypatch.setenv("RANDOM_THING", "not-for-tools")
    monkeypatch.setenv("GOPATH", "/go")
    monkeypatch.setenv("FROM_ENV_VAR", "yes")
    monkeypatch.setenv("CHRONICLE_TOOL_ENV", "FROM_ENV_VAR, ANTHROPIC_API_KEY")
    (tmp_path / "chronicle.toml").write_text('[tools]\nenv_passthrough = ["GOPATH", "CHRONICLE_DB"]\n', encoding="utf-8")
    out = asyncio.run(run_tool(ToolContext(workspace=tmp_path), "bash", command="env")).content
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert {"PATH", "GOPATH", "FROM_ENV_VAR"} <= names
    assert not names & {"ANTHROPIC_API_KEY", "CHRONICLE_DB", "RANDOM_THING"}


def test_bash_timeout_kills_the_group_while_output_streams(tmp_path: Path):
    ctx = ToolContext(workspace=tmp_path, timeout_s=1)
    out = asyncio.run(run_tool(ctx, "bash", command="sleep 300 & echo $! > bg.pid; yes"))
    assert out.is_error and "timed out after 1 s" in out.content
    assert len(out.content) < MAX_OUTPUT_CHARS + 200  # what was read so far, bounded
    bg = int((tmp_path / "bg.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the background child died with the group
        for _ in range(50):
            os.kill(bg, 0)
            asyncio.run(asyncio.sleep(0.1))


def test_bash_keeps_the_head_and_tail_of_huge_output(tmp_path: Path):
    ctx = ToolContext(workspace=tmp_path, timeout_s=120)
    out = asyncio.run(run_tool(ctx, "bash", command="echo FIRST; head -c 20000000 /dev/zero | tr '\\0' a; echo; echo LAST"))
    assert not out.is_error
    assert out.content.startswith("FIRST")
    assert out.content.endswith("LAST\n\n[exit code 0]")
    assert "bytes of output not shown" in out.content
    assert len(out.content) <= MAX_OUTPUT_CHARS + 200
    assert KEEP_BYTES < 20_000_000


def test_a_catastrophic_regex_neither_freezes_the_runtime_nor_runs_for_ever(tmp_path: Path):
    (tmp_path / "evil.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    ctx = ToolContext(workspace=tmp_path, timeout_s=1)

    async def scenario() -> tuple[str, int]:
        ticks = 0

        async def heartbeat() -> None:  # stands for lease renewal and the cancel watcher
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        beat = asyncio.create_task(heartbeat())
        try:
            await run_tool(ctx, "grep", pattern="(a+)+$")
        except ToolError as exc:
            message = str(exc)
        else:
            message = "finished"
        beat.cancel()
        return message, ticks

    message, ticks = asyncio.run(scenario())
    assert "backtrack" in message
    assert ticks > 0


def test_cancelling_grep_kills_its_matcher(tmp_path: Path):
    (tmp_path / "evil.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    ctx = ToolContext(workspace=tmp_path, timeout_s=60)
    seen: list[int] = []

    async def scenario() -> None:
        task = asyncio.create_task(run_tool(ctx, "grep", pattern="(a+)+$"))
        while not seen:
            await asyncio.sleep(0.05)
            seen.extend(_children())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert seen and not set(seen) & set(_children())


def test_grep_reports_a_bad_pattern_as_its_own_error(tmp_path: Path):
    with pytest.raises(ToolError, match="invalid regular expression"):
        asyncio.run(run_tool(ToolContext(workspace=tmp_path), "grep", pattern="("))


def _children() -> list[int]:
    """Live (not zombie) child processes of this test process running the grep worker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"grep_worker" in cmdline:
            found.append(int(entry.name))
    return found
