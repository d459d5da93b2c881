"""`chronicle demo`: an offline, scripted walk-through on a throwaway SQLite file."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.panel import Panel

from .common import cli_errors, fail, out_console, pasted
from .inspect_cmd import history, log
from .pipes import keep_going
from .render import HumanRenderer


def _tool(id_: str, name: str, **args: object) -> dict:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def _usage(i: int, o: int) -> dict:
    return {"input_tokens": i, "output_tokens": o}


DEMO_SCRIPT = {
    "agents": {
        "main": [
            [
                {"content": [{"type": "text", "text": "Let me look at the project first."}, _tool("tu_1", "list_dir", path=".")],
                 "stop_reason": "tool_use", "usage": _usage(420, 38)},
                {"content": [_tool("tu_2", "read_file", path="notes.txt"), _tool("tu_3", "grep", pattern="TODO")],
                 "stop_reason": "tool_use", "usage": _usage(510, 52)},
                {"content": [_tool("tu_4", "write_file", path="SUMMARY.md",
                                   content="# Summary\n\n- greet() needs a name parameter (TODO in app.py)\n")],
                 "stop_reason": "tool_use", "usage": _usage(640, 71)},
                {"content": [{"type": "text", "text": "The project is one module, app.py, with a TODO: greet() should take a name. "
                                                      "I wrote SUMMARY.md with that finding."}],
                 "stop_reason": "end_turn", "usage": _usage(700, 40)},
            ],
            [
                {"content": [{"type": "thinking", "thinking": "Edit greet() and check the result.", "signature": "demo-signature"},
                             _tool("tu_5", "edit_file", path="app.py", old='def greet():\n    return "hello"  # TODO: take a name',
                                   new='def greet(name):\n    return f"hello {name}"')],
                 "stop_reason": "tool_use", "usage": _usage(800, 90)},
                {"content": [_tool("tu_6", "read_file", file="app.py")], "stop_reason": "tool_use", "usage": _usage(900, 20)},
                {"content": [_tool("tu_7", "read_file", path="app.py")], "stop_reason": "tool_use", "usage": _usage(950, 20)},
                {"content": [{"type": "text", "text": "Done: greet(name) now returns a personal greeting. "
                                                      "(My first read used a wrong argument name; the error came back as a tool result and I retried.)"}],
                 "stop_reason": "end_turn", "usage": _usage(1000, 45)},
            ],
        ]
    },
    "title": ["Tidy up the greeting module"],
}

WORKSPACE_FILES = {
    "app.py": 'def greet():\n    return "hello"  # TODO: take a name\n',
    "notes.txt": "Chronicle demo project.\nEverything the agent does here is recorded as events.\n",
}


def _path_hint() -> str | None:
    """What to do first when a shell would not find `chronicle`: `make demo` runs .venv/bin/chronicle by its path, so
    the plain `chronicle ...` lines the demo offers work only once that directory is on PATH (README's quick start
    exports it after `make demo`)."""
    if shutil.which("chronicle"):
        return None
    bindir = Path(sys.executable).parent  # a venv's bin/, as the interpreter was started (not resolved)
    if (bindir / "chronicle").exists():
        return f'`chronicle` is not on your PATH; first run: export PATH="{bindir}:$PATH"'
    return "`chronicle` is not on your PATH; add the bin directory of the environment Chronicle is installed in"


def demo(
    keep: Annotated[Optional[Path], typer.Option("--dir", help="Keep the demo's database and workspace in this directory")] = None,
) -> None:
    """Run an offline scripted session with tools, then show how to inspect it. No API key needed."""
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    from chronicle.runtime.app.running import Conversation, RunOptions  # when it runs: `demo --help` needs neither
    from chronicle.runtime.collector import start_up_done
    from chronicle.runtime.store import ChronicleStore

    with cli_errors():
        if keep is not None and keep.exists() and not keep.is_dir():
            fail(f"--dir {keep} is a file; give a directory (it is created if missing)", 2)
        root = (keep or Path(tempfile.mkdtemp(prefix="chronicle-demo-"))).resolve()
        workspace = root / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        for name, text in WORKSPACE_FILES.items():
            (workspace / name).write_text(text, encoding="utf-8")
        script = root / "demo-script.json"
        script.write_text(json.dumps(DEMO_SCRIPT, indent=2), encoding="utf-8")
        db_url = f"sqlite:///{root / 'chronicle.db'}"
        store = ChronicleStore(db_url)
        start_up_done()
        provider = f"scripted:{script}"
        out_console.print(Panel.fit(f"Chronicle demo — database {db_url}\nworkspace {workspace}", style="bold"))

        prompts = ["Look around this project and write down what needs doing.", "Fix the TODO in app.py."]
        conversation = Conversation.open(store, None, RunOptions(provider=provider, workspace=workspace), [HumanRenderer(out_console)],
                                         first_input=prompts[0])
        session = store.session(conversation.session_id)
        for index, prompt in enumerate(prompts):
            if index:
                conversation.submit(prompt)
            out_console.print(f"\n[bold green]you ›[/] {prompt}")
            outcome = asyncio.run(conversation.drive()).outcome
            if outcome is None or outcome.status != "completed":
                fail(f"demo turn {index + 1} ended {outcome.status if outcome else 'idle'}: {outcome.reason if outcome else ''}")

        out_console.print("\n[bold]The event log[/] (every transition, in commit order):")
        log(str(session.id), as_json=False, db=db_url)
        out_console.print("\n[bold]What the model will see next[/]:")
        history(str(session.id), as_json=False, db=db_url)
        out_console.print("\n[bold]Inspect it yourself[/] (copy and paste):")
        hint = _path_hint()
        if hint:
            out_console.print(f"  ({escape(hint)})", soft_wrap=True)
        for command in (f"log {session.id}", f"log {session.id} --json", f"history {session.id} --json", f"why {session.id} tu_7",
                        "sessions"):
            out_console.print(f"  {pasted(command, db_url)}", soft_wrap=True)  # quoted: a --dir may hold spaces
