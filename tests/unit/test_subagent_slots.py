"""The global cap on running sub-agents: never more than the cap hold a slot at once across a whole
tree, and a tree deeper than the cap finishes (a delegating child frees its slot while it waits)."""

from __future__ import annotations

import asyncio

import pytest

from chronicle.runtime.agents.slots import child_slot, waiting_for_children
from chronicle.runtime.environment import EnvironmentSettingError, environment


def test_a_wide_deep_tree_never_runs_more_children_than_the_cap_and_does_not_deadlock(monkeypatch):
    monkeypatch.setenv("CHRONICLE_MAX_CONCURRENT_SUBAGENTS", "3")
    running = {"now": 0, "most": 0, "done": 0}

    async def work() -> None:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await asyncio.sleep(0)  # let every sibling try to run meanwhile
        running["now"] -= 1

    async def child(depth: int) -> None:
        async with child_slot():
            await work()
            if depth < 2:  # delegate 16 tasks, as the parent did
                async with waiting_for_children():
                    await asyncio.gather(*(child(depth + 1) for _ in range(16)))
            await work()
            running["done"] += 1

    async def top() -> None:  # the top-level agent holds no slot
        async with waiting_for_children():
            await asyncio.gather(*(child(1) for _ in range(16)))

    asyncio.run(asyncio.wait_for(top(), timeout=60))
    assert running["done"] == 16 + 16 * 16
    assert running["most"] == 3


def test_the_cap_is_a_validated_setting(monkeypatch):
    monkeypatch.setenv("CHRONICLE_MAX_CONCURRENT_SUBAGENTS", "0")
    with pytest.raises(EnvironmentSettingError, match="CHRONICLE_MAX_CONCURRENT_SUBAGENTS"):
        environment()
