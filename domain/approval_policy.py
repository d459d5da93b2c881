"""Which tool calls wait for a person, and what happens to them when none is asked: recorded on the spec.

A session keeps the policy it started under (AgentSpec.approvals), so `resume`, a worker and a
replay decide each call as the user set it, whichever process runs the turn and whatever the
workspace's chronicle.toml says by then (the agent can write that file). Sessions recorded before
the policy existed have None, which decides exactly as before: the tool's own `requires_approval`
flag, and a person asked.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Policy = Literal["ask", "deny", "allow"]
POLICIES: tuple[Policy, ...] = ("ask", "deny", "allow")


class ApprovalPolicy(BaseModel):
    """`require`: tools that need approval though their flag says not; `allow`: tools approved without
    asking (a standing allow); `policy`: what becomes of any other call that needs approval — ask a
    person, deny it (the model is told, the turn goes on) or allow it. `source` says where it was set,
    for the audit line of every decision it makes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: Policy = "ask"
    require: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    source: str = Field("", description="where the policy was set, e.g. chronicle.toml [approvals]")

    def requires(self, name: str, flagged: bool) -> bool:
        """Does a call of tool `name` need approval (`flagged`: its tool says so)? A tool on `allow` still
        does: its approval is then recorded, by the policy, rather than passing unrecorded."""
        return flagged or name in self.require

    def decide(self, name: str) -> tuple[Literal["approve", "deny"], str] | None:
        """The policy's own decision on a call that needs approval, with its cause; None: ask a person."""
        where = f" ({self.source})" if self.source else ""
        if name in self.allow:
            return "approve", f"{name} is in the approval policy's allow list{where}"
        if self.policy == "allow":
            return "approve", f'approval policy "allow"{where}'
        if self.policy == "deny":
            return "deny", (f'the approval policy "deny"{where} refuses calls that need approval without asking a person; '
                            f"do without {name} or say what you need")
        return None
