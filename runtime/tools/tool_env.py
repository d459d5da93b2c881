"""The environment a tool's process gets: an allow-list, never the runtime's own credentials.

`bash` inherited the whole process environment, so `env` printed ANTHROPIC_API_KEY and the
database URL with its password into the tool result — stored in the log and sent to the model.
A tool now sees only what a shell needs to work (PATH, HOME, locale, terminal, temp dir, user)
plus the variables the operator names, in `CHRONICLE_TOOL_ENV` (comma- or space-separated) or
in `[tools] env_passthrough = [...]` of the workspace's `chronicle.toml` (which tools cannot
write). The runtime's own credentials are never passed, whoever asks.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from chronicle.runtime.redaction import RUNTIME_SECRETS

from .base import ToolError
from .sandbox import CONFIG_FILE

ALLOWED = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "COLORTERM", "NO_COLOR", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL",
})
ALLOWED_PREFIXES = ("LC_",)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def configured_names(workspace: Path, environ: Mapping[str, str]) -> list[str]:
    """Names the operator lets through: CHRONICLE_TOOL_ENV, then chronicle.toml's [tools] env_passthrough."""
    names = [n for n in re.split(r"[,\s]+", environ.get("CHRONICLE_TOOL_ENV", "")) if n]
    path = workspace / CONFIG_FILE
    if path.is_file():
        try:
            config = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ToolError(f"{CONFIG_FILE} is not valid TOML ({exc}); fix it so tools know their environment") from None
        table = config.get("tools") or {}
        listed = table.get("env_passthrough", []) if isinstance(table, dict) else None
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise ToolError(f"{CONFIG_FILE}: [tools] env_passthrough must be a list of variable names, like [\"GOPATH\"]")
        names.extend(listed)
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise ToolError(f"not environment variable names: {', '.join(map(repr, bad))} (CHRONICLE_TOOL_ENV / [tools] env_passthrough)")
    return names


def tool_env(workspace: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    wanted = set(configured_names(workspace, env)) - set(RUNTIME_SECRETS)
    chosen = {
        name: value for name, value in env.items()
        if (name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name in wanted) and name not in RUNTIME_SECRETS
    }
    chosen.setdefault("PATH", os.defpath)
    chosen["PWD"] = str(workspace)
    return chosen
