"""Skills on disk: `skills/NAME/SKILL.md` in the workspace and in the dirs chronicle.toml names.

Discovery is deterministic (no model call): the workspace's `skills/` first, then each
configured dir in the order written; inside one, folders sorted by name; the first skill of a
name wins. What is found is recorded whole on the session's spec (domain/skill.py) when the
session starts, so the text the model sees never depends on the files staying the same.

    [skills]
    dirs = ["~/.chronicle/skills", "../shared-skills"]   # relative to the workspace

SKILL.md opens with front matter between `---` lines, simple `key: value` pairs (a YAML
subset: quoted values and `>`/`|` folded blocks work; other keys such as `license` are kept
out of the way):

    ---
    name: release-notes
    description: Write release notes from the git log
    when_to_use: the user asks for release notes or a changelog
    mode: on_demand          # or inline: the body goes into the system prompt
    version: 2
    ---
    1. Read the log ...
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.skill import SkillRecord

from .tools.base import Tool, ToolContext, ToolError, ToolOutput

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MODES = ("inline", "on_demand")
MAX_FILES = 100


class SkillError(ValueError):  # also the base of WorkspaceMemoryError: both are "fix this file", exit 2
    """A SKILL.md or the [skills] table cannot be used; the message names the file."""


def parse_front_matter(text: str, path: Path) -> tuple[dict[str, str], str]:
    """(front matter, body). No front matter: ({}, the whole text)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillError(f"{path}: front matter opened with --- is never closed with a --- line")
    meta: dict[str, str] = {}
    key: str | None = None
    block: list[str] = []
    folded = False
    for number, line in enumerate(lines[1:end], 2):
        if key is not None and (line.startswith((" ", "\t")) or not line.strip()):
            block.append(line.strip())
            continue
        if key is not None:
            meta[key] = " ".join(b for b in block if b) if folded else "\n".join(block).strip()
            key = None
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name.startswith((" ", "\t")):
            raise SkillError(f"{path}: line {number} of the front matter is not `key: value`: {line.strip()!r}")
        value = value.split(" #", 1)[0].strip()
        normal = name.strip().lower().replace("-", "_").replace(" ", "_")
        if value in (">", "|", ">-", "|-"):
            key, block, folded = normal, [], value.startswith(">")
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        meta[normal] = value
    if key is not None:
        meta[key] = " ".join(b for b in block if b) if folded else "\n".join(block).strip()
    body = "\n".join(lines[end + 1:]).lstrip("\n")
    return meta, body


def read_skill(skill_file: Path, workspace: Path) -> SkillRecord:
    try:
        raw = skill_file.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{skill_file}: cannot read it as UTF-8 text: {exc}") from None
    meta, body = parse_front_matter(text, skill_file)
    folder = skill_file.parent
    name = meta.get("name") or folder.name
    if not NAME.match(name):
        raise SkillError(f"{skill_file}: skill name {name!r} must be letters, digits, '.', '-' or '_' (at most 64)")
    mode = (meta.get("mode") or "on_demand").replace("-", "_")
    if mode not in MODES:
        raise SkillError(f"{skill_file}: mode must be inline or on_demand (got {meta.get('mode')!r})")
    if not body.strip():
        raise SkillError(f"{skill_file}: the skill has no body after its front matter")
    files = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*")
        if p.is_file() and p != skill_file and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )[:MAX_FILES]
    return SkillRecord(
        name=name, description=meta.get("description", ""), when_to_use=meta.get("when_to_use", ""), mode=mode,  # type: ignore[arg-type]
        version=str(meta.get("version", "")), sha256=hashlib.sha256(raw).hexdigest(), path=_shown(skill_file, workspace),
        body=body, files=tuple(files),
    )


def _shown(path: Path, workspace: Path) -> str:
    """Relative to the workspace when inside it (the file tools can read it then), else absolute."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def configured_dirs(config: dict[str, Any], source: str = "chronicle.toml") -> list[str]:
    table = config.get("skills") or {}
    if not isinstance(table, dict):
        raise SkillError(f"{source}: [skills] must be a table")
    unknown = sorted(set(table) - {"dirs"})
    if unknown:
        raise SkillError(f"{source}: unknown key(s) in [skills]: {', '.join(unknown)}; allowed: dirs")
    dirs = table.get("dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise SkillError(f"{source}: [skills] dirs must be a list of directory paths")
    return list(dirs)


def discover(workspace: Path, dirs: list[str] | tuple[str, ...] = ()) -> list[SkillRecord]:
    """Every skill, workspace first; a configured dir that does not exist is an error (a typo, most likely)."""
    workspace = workspace.resolve()
    roots = [workspace / "skills"]
    for entry in dirs:
        root = Path(entry).expanduser()
        root = root if root.is_absolute() else workspace / root
        if not root.is_dir():
            raise SkillError(f"[skills] dirs: {entry!r} is not a directory (looked at {root})")
        roots.append(root)
    found: dict[str, SkillRecord] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            skill_file = folder / SKILL_FILE
            if skill_file.is_file():
                record = read_skill(skill_file, workspace)
                found.setdefault(record.name, record)
    return list(found.values())


def workspace_skills(workspace: Path) -> list[SkillRecord]:
    """The skills a session started in `workspace` records: its skills/ plus chronicle.toml's [skills] dirs."""
    import tomllib

    config_file = workspace / "chronicle.toml"
    config: dict[str, Any] = {}
    if config_file.is_file():
        try:
            config = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise SkillError(f"{config_file} is not valid TOML: {exc}") from None
    return discover(workspace, configured_dirs(config, str(config_file)))


def with_skills(spec: AgentSpec, skills: list[SkillRecord] | tuple[SkillRecord, ...]) -> AgentSpec:
    """The spec with its skills recorded, and `load_skill` among its tools when any is on demand."""
    tools = [t for t in spec.tools if t != LoadSkill.name]
    if any(s.mode == "on_demand" for s in skills):
        tools.append(LoadSkill.name)
    return spec.model_copy(update={"skills": tuple(skills), "tools": tuple(tools)})


def skill_row(skill: SkillRecord) -> dict[str, Any]:
    """What `chronicle skills --json` prints per skill (name, description, mode, path are the contract)."""
    return {
        "name": skill.name, "description": skill.description, "mode": skill.mode, "path": skill.path,
        "when_to_use": skill.when_to_use, "version": skill.version, "sha256": skill.sha256, "files": list(skill.files),
    }


class LoadSkill(Tool):
    """Returns the skill as recorded on the session's spec, not as the file reads now: a resumed
    or replayed session gets the same text, and the header names its sha256 and version."""

    name = "load_skill"
    description = "Load the full procedure of one of the skills listed in <available_skills>, by name."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        name: str = Field(min_length=1, description="The skill's name as listed in <available_skills>")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if ctx.io is None:
            raise ToolError("load_skill needs the running agent loop")
        skills = ctx.io.store.session(UUID(ctx.session_id)).spec.skills
        skill = next((s for s in skills if s.name == args.name), None) or next(
            (s for s in skills if s.name.casefold() == args.name.casefold()), None
        )
        if skill is None:
            names = ", ".join(s.name for s in skills) or "none"
            raise ToolError(f"no skill named {args.name!r}; skills: {names}")
        folder = skill.path.rsplit("/", 1)[0] if "/" in skill.path else "."
        text = f'<skill name="{skill.name}" version="{skill.version}" sha256="{skill.sha256}">\n{skill.body.strip()}\n</skill>'
        if skill.files:
            text += "\nFiles beside it (read them with read_file):\n" + "\n".join(f"- {folder}/{f}" for f in skill.files)
        return ToolOutput(text)
