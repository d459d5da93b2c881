"""What a run keeps of an MCP tool's result, read from the whole store (every row, events decompressed) and from the
trace derived with content: a guardrail's replacement is all that is kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.store_dump import dump_store, holds

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


def server_table(extra: str = "") -> str:
    return (f'[mcp.t]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}, "stdio"]\n'
            f"trust_annotations = true\n{extra}")


def run_calls(db_url: str, workspace: Path, tmp_path: Path, *calls: dict[str, Any], env: dict[str, str] | None = None) -> str:
    """One `chronicle run` whose model calls these tools, then answers; the session's id."""
    script = write_script(tmp_path / "s.json", [response(*calls), response(text("done"))])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=db_url, env=env,
              timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return str(json_lines(cli("sessions", "--json", db=db_url).stdout)[0]["session_id"])


def completed(db_url: str, session_id: str) -> list[dict[str, Any]]:
    log = json_lines(cli("log", session_id, "--json", db=db_url).stdout)
    return [e["data"] for e in log if e["aggregate"] == "tool_call" and e["event"] == "Completed"]


def traced_results(db_url: str, session_id: str) -> list[str]:
    """What the trace says each tool returned, with content captured (CHRONICLE_OTEL_CAPTURE_CONTENT=1's spans)."""
    spans = json_lines(cli("export-traces", session_id, "--json", "--content", db=db_url).stdout)
    return [s["attributes"]["gen_ai.tool.call.result"] for s in spans if "gen_ai.tool.call.result" in s["attributes"]]


def test_a_result_a_guardrail_replaced_is_recorded_without_the_originals_blocks(db_url, workspace, tmp_path):
    """A check replacing an MCP tool's result replaced its text: the blocks recorded beside it (the SDK's structured
    copy of every result) were the original's, so what the check removed was stored all the same."""
    (workspace / "checks.py").write_text(
        "def scrub(text, where):\n    return text.replace('swordfish-4417', '[scrubbed]')\n", encoding="utf-8")
    (workspace / "chronicle.toml").write_text(
        server_table('env = { CODEWORD = "swordfish-4417" }\n')
        + '[guardrails.scrub]\ncheck = "checks:scrub"\non = ["tool_result"]\n', encoding="utf-8")
    session_id = run_calls(db_url, workspace, tmp_path, tool_use("u1", "t__env_value", variable="CODEWORD"))
    (call,) = completed(db_url, session_id)
    assert call["output"] == "CODEWORD is [scrubbed]" and call["blocks"] is None, call
    assert call["effects"][0]["guardrail"] == "scrub" and call["effects"][0]["action"] == "modified"
    assert traced_results(db_url, session_id) == ["CODEWORD is [scrubbed]"]
    assert not holds(dump_store(db_url), "swordfish-4417"), "the original result reached the store"


def test_what_a_server_is_given_in_its_env_is_cut_from_everything_recorded(db_url, workspace, tmp_path):
    """A secret given to a server through its env table reached the store, and the trace with content, when the server
    printed it: only the process's own secret-named variables were cut. Now every value a `${VAR}` brings in is cut
    (but a variable every tool gets: TZ here) and the whole value of a secret-named key, even one written in the file."""
    (workspace / "chronicle.toml").write_text(server_table(
        'env = { API_TOKEN = "${MCP_TEST_TOK}", NOTE = "${MCP_TEST_NOTE}", LIT_PASSWORD = "pw-in-the-file-5566", TZ = "${TZ}" }\n'
    ), encoding="utf-8")
    secrets = {"MCP_TEST_TOK": "tok-supersecret-123456", "MCP_TEST_NOTE": "plainvalue-7788"}
    asked = [tool_use(f"u{i}", "t__env_value", variable=v) for i, v in enumerate(("API_TOKEN", "NOTE", "LIT_PASSWORD", "TZ"))]
    session_id = run_calls(db_url, workspace, tmp_path, *asked, env={**secrets, "TZ": "Europe/Amsterdam"})
    calls = completed(db_url, session_id)
    said = ["API_TOKEN is [REDACTED:environment]", "NOTE is [REDACTED:environment]", "LIT_PASSWORD is [REDACTED:environment]",
            "TZ is Europe/Amsterdam"]
    assert [c["output"] for c in calls] == said
    assert [c["blocks"][0]["text"] for c in calls] == said and [c["blocks"][1]["content"]["result"] for c in calls] == said
    # The four calls run in parallel: the trace lists their spans by when each started, which varies run to run.
    assert sorted(traced_results(db_url, session_id)) == sorted(said)
    dump = dump_store(db_url)
    assert not any(holds(dump, s) for s in (*secrets.values(), "pw-in-the-file-5566"))
