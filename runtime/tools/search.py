"""`glob` and `grep`: tree walks under the workspace's confinement (sandbox.py).

`glob` follows pathlib and bash's globstar: `*` stays inside one directory, `**` as a whole
segment spans any number of them (none included), so `**/*.txt` finds top-level files too and
`*.txt` does not recurse. `grep` matches in a child process (grep_worker.py) that a timeout
or a cancel kills, so no pattern can stall the runtime.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from .base import Tool, ToolContext, ToolError, ToolOutput, truncate

WORKER = Path(__file__).with_name("grep_worker.py")
#: A pattern still matching after this long is taken for catastrophic backtracking.
GREP_TIMEOUT_S = 20.0
MAX_HITS = 2000


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over '/'-separated relative paths, as a regular expression (pathlib semantics)."""
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if not parts:
        raise ToolError("empty glob pattern")
    out = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment(part) + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _segment(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        c = part[i]
        if c == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1  # "a**b" inside a segment is just "*"
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = part.find("]", i + 2 if part[i + 1:i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = part[i + 1:end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\")
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class Glob(Tool):
    name = "glob"
    description = (
        "Find workspace files whose relative path matches a glob pattern: '*' matches within one directory, "
        "'**' any number of directories (none included), so '**/*.py' finds every .py file and '*.py' only top-level ones."
    )
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        pattern: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if Path(args.pattern).is_absolute() or ".." in Path(args.pattern).parts:
            raise ToolError(f"pattern {args.pattern!r} reaches outside the workspace")
        regex = glob_regex(args.pattern)
        sandbox = ctx.sandbox

        def matches() -> list[str]:
            shown = (Path(p).relative_to(sandbox.workspace).as_posix() for p in sandbox.walk(sandbox.workspace))
            return sorted(s for s in (_display_posix(s) for s in shown) if regex.match(s))

        found = await asyncio.to_thread(matches)
        return ToolOutput(truncate("\n".join(found)) if found else "no files match")


def _display_posix(path: str) -> str:
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


class Grep(Tool):
    name = "grep"
    description = "Search workspace text files for a regular expression (Python syntax); prints path:line:text."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        pattern: str
        path: str = Field(".", description="File or directory to search, relative to the workspace")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        sandbox = ctx.sandbox
        target = sandbox.confine(args.path)
        if not target.exists():
            raise ToolError(f"no such file or directory: {args.path}")

        def files() -> list[list[str]]:
            paths = [target] if target.is_file() else list(sandbox.walk(target))
            return sorted([sandbox.rel(p), os.fsencode(p).decode("latin-1")] for p in paths)

        request = {"pattern": args.pattern, "files": await asyncio.to_thread(files), "max_hits": MAX_HITS}
        timeout = min(ctx.timeout_s, GREP_TIMEOUT_S)
        out, err = await _run_worker(json.dumps(request).encode(), timeout, args.pattern)
        if err:
            raise ToolError(f"invalid regular expression {args.pattern!r}: {err}")
        text = out.decode("utf-8", errors="replace")
        more = text.endswith("\0more\n")
        hits = text.removesuffix("\0more\n").rstrip("\n")
        if not hits:
            return ToolOutput("no matches")
        suffix = f"\n[stopped after {MAX_HITS} matches; narrow the pattern or the path]" if more else ""
        return ToolOutput(truncate(hits) + suffix)


async def _run_worker(request: bytes, timeout: float, pattern: str) -> tuple[bytes, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(WORKER),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={},
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(request), timeout=timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ToolError(
            f"grep stopped after {timeout:g} s: the pattern {pattern!r} may backtrack catastrophically "
            "(nested quantifiers such as (a+)+); simplify it or search a narrower path"
        ) from None
    except BaseException:  # cancelled: the child must not outlive the call
        process.kill()
        await process.wait()
        raise
    if process.returncode == 2:
        return out, err.decode("utf-8", errors="replace").strip()
    if process.returncode != 0:
        lines = err.decode("utf-8", errors="replace").strip().splitlines()
        raise ToolError(f"grep failed: {lines[-1] if lines else f'exit code {process.returncode}'}")
    return out, ""
