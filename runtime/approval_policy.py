"""The approval policy as users write it: `[approvals]`, `[agents.NAME.approvals]`, `Agent(approvals=...)`.

Each is read into the domain's ApprovalPolicy once, when a session starts, with where it came
from; the session records it on its spec (domain/approval_policy.py) and the tool runner decides
every call from that record. A bad table is refused with one line naming the key (exit 2), before
anything is recorded.

A tool name in `require` or `allow` that no agent of the session has (a misspelling: `allow = ["bassh"]`)
is refused when a new session starts (`check_tool_names`), naming it and the tools there are: that is when
the session's tool set is known — the user's tools by import path are loaded then, and each MCP server
named for the session is asked for its tools then and they are recorded, so an MCP tool's name
(`SERVER__tool`) is known too, and one the server did not list can never be called in that session.
A session already recorded keeps its policy as it is (refusing it would leave it unable to continue).

    [approvals]
    policy = "deny"            # ask (default) | deny | allow: a call that needs approval, unasked
    require = ["write_file"]   # need approval though the tool does not say so
    allow = ["bash"]           # approved without asking, each approval recorded as the policy's
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from chronicle.domain.approval_policy import POLICIES, ApprovalPolicy, Policy

KEYS = ("policy", "require", "allow")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class ApprovalPolicyError(ValueError):
    """A policy that cannot be used; the message names where it was written and the key."""


class ApprovalsTable(BaseModel):
    """One `[approvals]` table (or `Agent(approvals=...)` mapping) as written."""

    model_config = ConfigDict(extra="forbid")
    policy: Policy = "ask"
    require: list[str] = []
    allow: list[str] = []

    @field_validator("require", "allow")
    @classmethod
    def _tool_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                raise ValueError(f"{name!r} is not a tool name")
        return names


def parse_policy(table: Any, where: str, source: str) -> ApprovalPolicy:
    """`table` as an ApprovalPolicy recorded with `source`; `where` prefixes the one-line error."""
    if isinstance(table, ApprovalPolicy):
        return table.model_copy(update={"source": table.source or source})
    if not isinstance(table, Mapping):
        raise ApprovalPolicyError(f"{where} must be a table with {', '.join(KEYS)}, like policy = \"deny\"")
    try:
        parsed = ApprovalsTable.model_validate(dict(table))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"][:1]) or "(table)"
        if first["type"] == "extra_forbidden":
            message = f"unknown key; allowed: {', '.join(KEYS)}"
        elif first["type"] == "literal_error":
            message = f"expected one of {', '.join(POLICIES)}, got {first.get('input')!r}"
        elif first["type"] == "string_type":
            message = f"{first.get('input')!r} is not a tool name"
        elif first["type"] == "list_type":
            message = f"expected a list of tool names, like {key} = [\"bash\"], got {first.get('input')!r}"
        else:
            message = first["msg"].removeprefix("Value error, ")
        raise ApprovalPolicyError(f"{where}.{key}: {message}") from None
    return ApprovalPolicy(policy=parsed.policy, require=tuple(parsed.require), allow=tuple(parsed.allow), source=source)


def workspace_policy(workspace: Path) -> ApprovalPolicy | None:
    """`[approvals]` of the workspace's chronicle.toml, for an agent given in code that sets none (None: no table)."""
    from .settings import CONFIG_FILE, load_config

    config = load_config(workspace)
    if "approvals" not in config:
        return None
    return parse_policy(config["approvals"], f"{workspace / CONFIG_FILE}: approvals", f"{CONFIG_FILE} [approvals]")


def check_tool_names(policies: Iterable[ApprovalPolicy | None], tools: Collection[str]) -> None:
    """Refuse a policy naming a tool that none of the session's agents has: it would match nothing, silently.
    Checked against every agent's tools together, as `[approvals]` applies to each agent whatever its tool set."""
    for policy in policies:
        if policy is None:
            continue
        for key in ("require", "allow"):
            unknown = [name for name in getattr(policy, key) if name not in tools]
            if unknown:
                raise ApprovalPolicyError(
                    f"{policy.source or 'approvals'}: {key} names {', '.join(map(repr, unknown))}, no tool of this session's "
                    f"agents (misspelt?); its tools are {', '.join(sorted(tools)) or 'none'}")
