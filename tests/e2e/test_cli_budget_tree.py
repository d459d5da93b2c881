"""The cost guard and `chronicle cost` read the same rows, and a session budget covers its sub-agents."""

from __future__ import annotations

import re

from tests.e2e.test_cli_subagents import REGISTRY, complete, delegate
from tests.helpers import cli, json_lines, response, text, write_script


def test_a_budget_counts_what_the_sub_agents_spent_and_stops_at_the_figure_cost_reports(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(
        tmp_path / "script.json",
        [response(delegate("tu_d", ("researcher", "read hello.txt"))), response(text("never reached"))],
        researcher=[response(complete("r1", "hello world"), usage=(10_000, 1_000))],
    )
    run = cli("run", "investigate", "--provider", f"scripted:{script}", "--model", "claude-sonnet-4-5",
              "--workspace", str(workspace), "--budget-usd", "0.02", "--json", db=db_url)
    assert run.returncode == 4, run.stderr
    parent = json_lines(run.stdout)[0]["session_id"]
    spent = float(re.search(r"session budget reached: \$([0-9.]+) spent", run.stderr).group(1))
    assert spent > 0.02, "the parent alone spent far less: the children's spend was not counted"

    cost = json_lines(cli("cost", parent, "--json", db=db_url).stdout)
    own = next(c for c in cost if c["scope"] == "self")["usd"]
    total = next(c for c in cost if c["scope"] == "total")["usd"]
    assert own < 0.02 <= total
    assert round(total, 4) == spent
