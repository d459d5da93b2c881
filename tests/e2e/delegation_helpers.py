"""A shop's tools written into a workspace, and a parent session that died while its sub-agent `clerk` used them: the
setup of tests that change a session's tools between runs and expect one refusal line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chronicle.domain.session import Session
from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end
from tests.helpers import cli, response, text, tool_use

#: shop_tools.py's tools, as a workspace's own module; each test adds its TOOLS list or changes a tool.
SHOP_TOOLS = '''
from chronicle import tool


@tool(read_only=True)
def lookup_order(order_id: str) -> str:
    """Find an order by its id."""
    return f"order {order_id}: shipped"


@tool(read_only=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"
'''

#: A tool that ends the process (exit 9) while `halt.flag` is beside its module: a crash mid-delegation.
HALT_TOOL = '''

@tool(read_only=True)
def halt(reason: str) -> str:
    """Stop here."""
    import os
    from pathlib import Path

    if Path(__file__).with_name("halt.flag").exists():
        os._exit(9)  # the process dies mid-delegation, as a crash would
    return f"halted: {reason}"
'''


def refused(run: Any, *named: str) -> str:
    """The one stderr line of a refusal (exit 2, no traceback), holding each of `named`."""
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    for part in named:
        assert part in lines[0], lines[0]
    return lines[0]


def died_while_the_clerk_worked(db_url: str, workspace: Path, tmp_path: Path, config: str, tools: str) -> tuple[ChronicleStore, Session, Any]:
    """`clerk` calls `refund`, then `halt` ends the process (exit 9) with the clerk's turn and its parent's in flight.
    `config` is the workspace's chronicle.toml defining clerk, `tools` its shop_tools.py (with refund and halt); the
    halt is disarmed afterwards, so a resume goes on. Returns the store, the clerk's session and its parent's id."""
    (workspace / "chronicle.toml").write_text(config, encoding="utf-8")
    (workspace / "shop_tools.py").write_text(tools, encoding="utf-8")
    (workspace / "halt.flag").write_text("", encoding="utf-8")
    task = tool_use("d1", "delegate", tasks=[{"agent": "clerk", "task": "refund order 7"}])
    provider = f"scripted:{tmp_path / 's.json'}"
    (tmp_path / "s.json").write_text(json.dumps({"agents": {
        "main": [[response(task), response(text("the clerk refunded it"))]],
        "clerk": [[response(tool_use("c1", "refund", order_id="7")), response(tool_use("c2", "halt", reason="check")),
                   response(tool_use("c3", "task_complete", status="completed", summary="refunded 7"))]],
    }}), encoding="utf-8")
    died = cli("run", "refund 7", "--provider", provider, "--workspace", str(workspace), db=db_url)
    assert died.returncode == 9, (died.returncode, died.stderr)
    store = closed_at_end(ChronicleStore(db_url))
    [child] = [store.session(s) for s in store.session_ids() if store.session(s).parent_session_id]
    (workspace / "halt.flag").unlink()
    return store, child, child.parent_session_id
