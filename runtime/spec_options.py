"""What a new session's spec takes from `[agent]` and `[models]` of chronicle.toml and CHRONICLE_AUX_MODEL.

    [agent]
    preamble = false      # no default system prompt (workspace, date, tools): your instructions alone
    bootstrap = false     # no AGENTS.md, TOOLS.md or MEMORY.md read into the system prompt
    behavioral_hints = false   # the default prompt without its <behavioral_constraints> (how to work), facts kept

    [models]
    auxiliary = "claude-haiku-4-5"   # titles, compaction summaries, the heartbeat; default: the main model

Read from the file the session's agents come from (`--agents FILE`, else the workspace's
chronicle.toml) when a top-level session starts, and settled into what its spec records (the
preamble text, the files, `aux_model`), so a later change to the file or the environment never
changes a session already recorded. The order for each is code (`Agent(preamble=..., bootstrap=...,
aux_model=...)`), then the environment (CHRONICLE_AUX_MODEL), then the file, then the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, field_validator

from .environment import environment
from .settings import CONFIG_FILE, SettingsError, config_table, read_toml


class AgentValues(BaseModel):
    """`[agent]`: switches for what a new top-level session's system prompt is built from."""

    model_config = ConfigDict(extra="forbid")
    preamble: StrictBool = True
    bootstrap: StrictBool = True
    behavioral_hints: StrictBool = True


class ModelValues(BaseModel):
    """`[models]`: the auxiliary model's name (a blank one is refused: leave the key out for the main model)."""

    model_config = ConfigDict(extra="forbid")
    auxiliary: StrictStr | None = None

    @field_validator("auxiliary")
    @classmethod
    def _named(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError(f"[models] auxiliary: expected a model name, got {value!r}; leave it out to use the main model")
        return value


@dataclass(frozen=True)
class SpecOptions:
    preamble: bool = True
    bootstrap: bool = True
    behavioral_hints: bool = True
    #: "" = the main model.
    aux_model: str = ""


def spec_options(workspace: Path, source: Path | None = None, preamble: bool | None = None, bootstrap: bool | None = None,
                 aux_model: str | None = None, behavioral_hints: bool | None = None) -> SpecOptions:
    """The choices of `source` (the agents file the registry came from: `--agents`, else the workspace's chronicle.toml),
    each overridden by the value given in code (None: not given)."""
    path = source or workspace / CONFIG_FILE
    config = read_toml(path) if path.is_file() else {}
    agent: AgentValues = config_table(config, "agent", AgentValues, path)
    models: ModelValues = config_table(config, "models", ModelValues, path)
    from_env = (environment().aux_model or "").strip()  # CHRONICLE_AUX_MODEL
    if aux_model is not None and (not aux_model.strip() or aux_model != aux_model.strip()):
        raise SettingsError(f"aux_model: expected a model name, got {aux_model!r}; leave it out (None) to use the main model")
    return SpecOptions(
        preamble=agent.preamble if preamble is None else preamble,
        bootstrap=agent.bootstrap if bootstrap is None else bootstrap,
        behavioral_hints=agent.behavioral_hints if behavioral_hints is None else behavioral_hints,
        aux_model=aux_model or from_env or models.auxiliary or "",
    )
