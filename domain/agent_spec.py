"""What an agent is: recorded on its Session so that resume, replay and audit know it exactly."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = "main"
    description: str = ""
    instructions: str = ""
    provider: str = ""
    model: str = ""
    tools: tuple[str, ...] = ()
    max_iterations: int = 20
    max_depth: int = 1
    depth: int = 0
    workspace: str = ""

    @property
    def system_prompt(self) -> str:
        return self.instructions
