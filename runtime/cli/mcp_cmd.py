"""`chronicle mcp list`: the MCP servers chronicle.toml defines, and the tools each one offers now."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import JsonOption, WorkspaceOption, err_console, fail, out_console, print_json, workspace_command
from .run_cmd import AgentsOption

app = typer.Typer(
    name="mcp",
    help="MCP tool servers defined by \\[mcp.NAME] tables in chronicle.toml.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.command("list")
def list_servers(
    as_json: JsonOption = False,
    workspace: WorkspaceOption = None,
    agents: AgentsOption = None,
    server: Annotated[Optional[str], typer.Option("--server", help="Only this server")] = None,
) -> None:
    """Start each configured server (as a session would) and list its tools as the model would see them.

    JSON: one object per tool with `server`, `transport`, `name` (as the model sees it, SERVER__tool), `tool` (the server's own name), `description`, `read_only`, `idempotent`, `requires_approval`, `parallel_safe`, `agents`, `input_schema`; a server that cannot be reached gives one object with `server`, `transport` and `error`, and the exit code is 1.
    """
    # Imported when the command runs: the registry and the MCP client bring pydantic and the MCP SDK
    # (the tools package among them, which a lazy module would still import), which `--help` needs not.
    from chronicle.runtime.agents import registry as registries
    from chronicle.runtime.tools import mcp_config, mcp_hub, mcp_tools

    with workspace_command(workspace) as ws:
        try:
            registry = registries.find_registry(agents, ws)
        except registries.RegistryError as exc:
            fail(str(exc), 2)
        servers = registry.mcp
        if server is not None:
            if server not in servers:
                fail(
                    f"no MCP server named {server!r} in "
                    f"{registry.source or (ws / 'chronicle.toml' if (ws / 'chronicle.toml').is_file() else str(ws) + ' (it has no chronicle.toml to define [mcp.NAME] in)')}"
                    f"{' (servers: ' + ', '.join(servers) + ')' if servers else ''}",
                    2,
                )
            servers = {server: servers[server]}
        rows: list[dict[str, Any]] = []
        notes: list[str] = []
        failed = False
        for config in servers.values():
            try:
                entries = mcp_tools.list_server_tools(config, ws)
                notes += _clashes(entries)
                for entry in entries:
                    rows.append(
                        {
                            "server": config.name,
                            "transport": config.transport,
                            "name": entry["name"],
                            "tool": entry["tool"],
                            "description": entry["description"],
                            **entry["flags"],
                            "agents": list(config.agents),
                            "input_schema": entry["input_schema"],
                        }
                    )
            except mcp_config.McpConfigError as exc:
                failed = True
                rows.append({"server": config.name, "transport": config.transport, "error": str(exc)})
        mcp_hub.HUB.close()
        if as_json:
            for row in rows:
                print_json(row)
        else:
            _table(rows, registry.source or ws / "chronicle.toml")
        for note in notes:
            err_console.print(f"note: {escape(note)}", soft_wrap=True)
        if failed:
            raise typer.Exit(1)


def _clashes(entries: list[dict[str, Any]]) -> list[str]:
    """One line per tool offered under a suffixed name because its cleaned name clashed with another tool's."""
    from chronicle.runtime.tools.mcp_tools import public_name, renamed

    lines = []
    for entry in entries:
        if renamed(entry):
            plain = public_name(entry["server"], entry["tool"])
            others = [repr(e["tool"]) for e in entries if e is not entry and public_name(e["server"], e["tool"]) == plain]
            lines.append(f"MCP server {entry['server']!r}: tool {entry['tool']!r} is offered as {entry['name']}, "
                         f"as {plain} would clash with {' and '.join(others)}")
    return lines


def _table(rows: list[dict[str, Any]], source: Path) -> None:
    if not rows:
        where = f"in {escape(str(source))}" if source.is_file() else f"configured: {escape(str(source))} does not exist"
        out_console.print(f"no MCP servers {where} (add \\[mcp.NAME] tables)")
        return
    table = Table("server", "tool", "flags", "agents", "description", box=None, pad_edge=False)
    for row in rows:
        if "error" in row:
            table.add_row(escape(row["server"]), "[red]unavailable[/]", "", "", escape(row["error"]))
            continue
        flags = ", ".join(f for f in ("read_only", "idempotent", "requires_approval") if row[f]) or "-"
        table.add_row(
            escape(row["server"]), escape(row["name"]), flags, escape(", ".join(row["agents"])), escape(row["description"].split("\n")[0])
        )
    out_console.print(table)
