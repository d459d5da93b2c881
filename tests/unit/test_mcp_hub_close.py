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


def test_close_after_the_hubs_thread_has_ended_closes_the_loop_without_asking_it_anything() -> None:
    """A loop whose thread is gone runs nothing: a close that asked it to stop the servers waited 15 s
    for an answer that could not come (at exit, or in a host that stopped the loop itself)."""
    import threading

    hub = McpHub()
    loop = hub._ensure_loop()
    loop.call_soon_threadsafe(loop.stop)
    assert hub._thread is not None
    hub._thread.join(timeout=10)
    closing = threading.Thread(target=hub.close, daemon=True)
    closing.start()
    closing.join(timeout=10)  # far inside the 15 s a question to the dead loop waited
    assert not closing.is_alive() and loop.is_closed()
