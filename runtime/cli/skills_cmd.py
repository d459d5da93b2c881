"""`chronicle skills`: the skills a session started in this workspace would record, as discovery finds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from .common import JsonOption, WorkspaceOption, out_console, print_json_rows, workspace_command
from .lazy import lazy_module
from .tables import Column, fit_table

if TYPE_CHECKING:  # reading skills validates them with pydantic; `--help` needs none of it
    from chronicle.runtime import skills as skill_files
else:
    skill_files = lazy_module("chronicle.runtime.skills")


def skills(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """List the skills found in the workspace's skills/NAME/SKILL.md and in chronicle.toml's \\[skills] dirs, in the order a new session records them. Inline skills go into the system prompt; on-demand ones are listed there and loaded with the load_skill tool."""
    with workspace_command(workspace) as ws:
        rows = [skill_files.skill_row(s) for s in skill_files.workspace_skills(ws)]
        if as_json:
            print_json_rows(rows)
            return
        if not rows:
            out_console.print(f"no skills in {escape(str(ws))}: add skills/NAME/SKILL.md (front matter: name, description, mode)")
            return
        columns = [Column("name"), Column("mode"), Column("description", flex=True), Column("path", optional=True)]
        table = [{k: escape(str(r[k])) for k in ("name", "mode", "description", "path")} for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))
