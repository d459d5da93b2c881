"""Closing the MCP hub closes its event loop, not only stops it: a program that closes and uses the
hub again (tests, a long-lived host) left each stopped loop's selector open until the collector
found it, which then said so as a ResourceWarning inside whatever code was running."""

from __future__ import annotations

from chronicle.runtime.tools.mcp_hub import McpHub


def test_close_stops_and_closes_the_hubs_loop_and_a_later_use_starts_a_new_one() -> None:
    hub = McpHub()
    first = hub._ensure_loop()
    hub.close()  # at once: its thread may not have started the loop yet, which close waits for
    assert first.is_closed()
    second = hub._ensure_loop()
    try:
        assert second is not first and not second.is_closed()
    finally:
        hub.close()
    assert second.is_closed()
