"""The price table loads while the first model call is in flight, not after its response.

Importing genai-prices costs about 70 ms on an idle machine; priced after the first response, it
was added to every `chronicle run`. Each check runs in a fresh interpreter, since this one may
have imported the table already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

IN_FLIGHT = textwrap.dedent('''
    import asyncio, json, sys, time
    from pathlib import Path
    from chronicle.runtime.providers.scripted import ScriptedProvider
    from tests.integration.loop_harness import Harness
    from tests.helpers import response, text

    seen = []

    def table_loaded():
        """The package has run to its end (the module is in sys.modules from the moment its import starts)."""
        return hasattr(sys.modules.get("genai_prices"), "extract_usage")

    class Slow(ScriptedProvider):
        """A model call that takes a while, as a real one does; notes whether the table arrived meanwhile."""
        async def stream(self, request, on_delta):
            deadline = time.monotonic() + 20
            while not table_loaded() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            seen.append(table_loaded())
            return await super().stream(request, on_delta)

    where = Path(sys.argv[1])
    h = Harness(f"sqlite:///{where / 'c.db'}", where, where, [response(text("hi"))])
    h.provider = h.loop.provider = Slow(where / "script.json")
    assert "genai_prices" not in sys.modules, "the table was loaded before any model call"
    outcome = h.run("hello")
    usage = [e for e in h.events if type(e).__name__ == "UsageEvent"]
    print(json.dumps({"status": outcome.status, "seen": seen, "usd": usage[0].usd}))
''')


def test_the_price_table_is_imported_while_the_first_model_call_waits(tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", IN_FLIGHT, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=root)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed"
    assert result["seen"] == [True]  # arrived before the call returned: nothing waited on it
    assert result["usd"] is None  # the scripted model has no price; pricing still ran, after the wait
