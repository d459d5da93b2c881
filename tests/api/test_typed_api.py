"""The package is typed (PEP 561 `py.typed`): a program checked with `mypy --strict` reads `@tool`, `Chronicle` and
`stream` as they behave, not as `Any`.

`tool` was annotated `-> Any`, so `@tool(read_only=True) def add(...)` failed `--strict` with "Untyped decorator makes
function "add" untyped", and `async for event in app.stream(...)` yielded `Any`. The program below is checked as a
user's would be: in a directory of its own, with the package found on MYPYPATH in its installed layout
(`chronicle/{domain,projections,runtime}`). mypy cannot follow the editable install's package-dir mapping, so the
layout is a tree of links, as ops/typecheck.sh builds for CI's lint (README, *Tests*).
"""

from __future__ import annotations

import os
import sys
import textwrap
import tomllib
from pathlib import Path

from tests import processes

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = '''
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, assert_type

from fastapi import FastAPI

import chronicle
from chronicle import (Agent, Chronicle, Hook, LiveEvent, ModelRequest, ModelResponse, NeedApproval, RunResult, Session, Skip,
                       Stop, Tool, ToolCall, ToolContext, Turn, tool)


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def greet(name: str, loud: bool = False) -> str:
    return name.upper() if loud else name


@tool(timeout_s=5, idempotent=True)
async def fetch(ctx: ToolContext, url: str) -> str:
    return url


# The decorated object is the tool (a Tool), and calling it calls the function: typed as the function.
as_tool: Tool = add
as_function: Callable[[int, int], int] = add
as_coroutine: Callable[[ToolContext, str], Awaitable[str]] = fetch
assert_type(add(1, 2), int)
assert_type(greet("ann", loud=True), str)
# --strict warns of an unused ignore: these lines fail the check unless the call is checked against the function.
add("1", 2)  # type: ignore[arg-type]
greet(name=3)  # type: ignore[arg-type]


@dataclass
class Quota(Hook):  # docs/controls.md's example: a hook annotated with what it is given, all of it from `chronicle`
    tools: int = 10
    name = "quota"

    async def before_tool_call(self, session: Session, turn: Turn, call: ToolCall) -> Stop | Skip | NeedApproval | None:
        assert_type(call.name, str)  # the real classes, not Any (which the lazy `__getattr__` alone would give)
        assert_type(turn.model_calls, int)
        if call.name == "bash" and "rm -rf" in call.input.get("command", ""):
            return NeedApproval("a recursive delete")
        if call.name == "write_file" and call.input.get("path", "").startswith(".git/"):
            return Skip(".git is not written by hand")
        if turn.model_calls > self.tools:
            return Stop(reason=f"more than {self.tools} model calls")
        return None

    async def before_model_call(self, session: Session, turn: Turn, request: ModelRequest) -> Stop | None:
        return Stop(reason="a long turn") if request.call_index > self.tools else None

    async def after_model_call(self, session: Session, turn: Turn, response: ModelResponse) -> None:
        print(session.id, response.model_dump())


agent = Agent(name="support", instructions="Add.", tools=[add, greet, fetch, "read_file"],
              provider="scripted:/nowhere/script.json", hooks=[Quota(tools=5)])
assert_type(chronicle.__version__, str)


async def main() -> None:
    async with Chronicle("sqlite:////nowhere/agent.db") as app:
        async for event in app.stream(agent, "1 + 2?"):
            assert_type(event, LiveEvent)
            print(event.type, event.model_dump())
        result = await app.run(agent, "2 + 3?")
        assert_type(result.text, str)
        app.steer(result.session_id, text="and then this")  # README's name for it
        # README's call: a result's input_id (None only for resume's, which the call refuses) is what answer takes
        answer = await app.answer_async(result.session_id, result.input_id)
        assert_type(answer, RunResult)
        served = app.http_app(agent)  # the `server` extra's app, as its type: routes and middleware can be added
        assert_type(served, FastAPI)
'''


def installed_layout(into: Path) -> Path:
    """`into/chronicle/...` as `pip install` lays the package out, from pyproject.toml's package-dir map, in links."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    top = into / "chronicle"
    top.mkdir(parents=True)
    for name, directory in package_dir.items():
        if name == "chronicle":
            for source in (ROOT / directory).iterdir():
                if source.suffix == ".py" or source.name == "py.typed":
                    (top / source.name).symlink_to(source)
        else:
            (into / name.replace(".", "/")).symlink_to(ROOT / directory, target_is_directory=True)
    return into


#: mypy reports nothing inside an installed package (it is the package's business, not the program's); found on MYPYPATH
#: it would, so the program's configuration says so for `chronicle`, as for any package installed.
CONFIG = """
[mypy]
strict = True

[mypy-chronicle.*]
follow_imports = silent
"""


def test_a_program_using_the_api_passes_mypy_strict(tmp_path):
    packages = installed_layout(tmp_path / "site")
    program = tmp_path / "program" / "agent_program.py"
    program.parent.mkdir()
    program.write_text(textwrap.dedent(PROGRAM), encoding="utf-8")
    (program.parent / "mypy.ini").write_text(CONFIG, encoding="utf-8")
    mypy = Path(sys.executable).with_name("mypy")
    env = {**os.environ, "MYPYPATH": str(packages)}
    done = processes.run([str(mypy), "--strict", "--config-file", "mypy.ini", "--no-incremental", "--cache-dir", os.devnull,
                          program.name], cwd=program.parent, env=env, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
