"""Start-up: each command imports what it runs and nothing else.

`chronicle --version` answers before importing any command, the store or a provider SDK; a read
command on a SQLite store (`sessions`, `log`) imports neither the loop, the tools, a provider SDK
nor the PostgreSQL driver. Speed itself is measured by `ops/bench` (start-up section), not here.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
sys.argv = ["chronicle", "--version"]
from chronicle.runtime.cli.entry import main
main()
heavy = ("chronicle.runtime.cli.app", "chronicle.runtime.store", "chronicle.client", "anthropic", "eventsourcing", "pydantic", "typer")
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""


def test_version_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, loaded = out.stdout.splitlines()
    assert first.startswith("chronicle ")
    assert loaded == "[]"


def test_the_library_names_still_import_from_the_package():
    from chronicle import Agent, Chronicle, ToolError, TurnEnd, tool

    assert callable(tool) and Agent and Chronicle and TurnEnd and issubclass(ToolError, Exception)


def test_python_dash_m_chronicle_is_the_chronicle_command(tmp_path):
    """`python -m chronicle` runs the command (for an environment whose scripts are not on PATH): the same version line,
    usage under the command's name, the same errors and exit codes. `python -m chronicle` printed "No module named
    chronicle.__main__", and `python -m chronicle.runtime.cli.entry --version` printed nothing."""
    from importlib.metadata import version

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)

    expected = f"chronicle {version('chronicle-agent')}\n"
    assert run("-m", "chronicle", "--version").stdout == expected
    assert run("-m", "chronicle.runtime.cli.entry", "--version").stdout == expected
    helped = run("-m", "chronicle", "--help")
    assert helped.returncode == 0 and "Usage: chronicle [OPTIONS] COMMAND" in helped.stdout, helped.stderr
    missing = ["sessions", "--db", f"sqlite:///{tmp_path}/none.db"]
    command = subprocess.run([str(Path(sys.executable).with_name("chronicle")), *missing], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path)
    module = run("-m", "chronicle", *missing)
    assert command.stderr.startswith("error: no Chronicle store at "), command.stderr
    assert (module.returncode, module.stdout, module.stderr) == (command.returncode, command.stdout, command.stderr)


def test_the_package_has_a_version_and_lists_its_names_without_importing_them():
    """`chronicle.__version__` was an AttributeError, and `dir(chronicle)` left out every name imported on first use."""
    probe = ("import sys, chronicle; print(chronicle.__version__); print(sorted(set(chronicle.__all__) - set(dir(chronicle))));"
             "print('__version__' in dir(chronicle)); print(sorted(m for m in sys.modules if m.startswith(('chronicle.', 'pydantic'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    from importlib.metadata import version

    assert out.stdout.splitlines() == [version("chronicle-agent"), "[]", "True", "[]"], out.stderr


READ = """
import sys
sys.argv = ["chronicle", *sys.argv[1:]]
from chronicle.runtime.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = ("anthropic", "openai", "mcp", "psycopg", "eventsourcing.postgres", "asyncio", "pydantic_settings", "cryptography",
         "chronicle.runtime.loop", "chronicle.runtime.tools", "chronicle.runtime.providers", "chronicle.runtime.live",
         "chronicle.runtime.cli.run_cmd", "chronicle.runtime.cli.worker_cmd", "chronicle.runtime.server", "chronicle.client")
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""


def test_read_commands_on_a_sqlite_store_import_no_loop_sdk_or_postgres_driver(tmp_path):
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session
    from chronicle.runtime.store import open_store_at

    url = f"sqlite:///{tmp_path / 'chronicle.db'}"
    session, _ = start_session(open_store_at(url), AgentSpec(name="main"), "hello")
    env = {"PATH": "/usr/bin:/bin", "CHRONICLE_DB": url, "COLUMNS": "120"}
    for args in (["sessions"], ["sessions", "--json"], ["log", str(session.id)[:8]], ["log", str(session.id), "--json"]):
        out = subprocess.run([sys.executable, "-c", READ, *args], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert str(session.id)[:8] in out.stdout, out.stdout
        assert out.stdout.splitlines()[-1] == "[]", f"chronicle {' '.join(args)} imported {out.stdout.splitlines()[-1]}"


#: What `sessions` answered from current read models never needs (runtime/app/session_listing.py):
#: the domain (eventsourcing builds its event classes into dataclasses), the store, the engine and
#: the projections that import the domain, and pydantic (typer 0.29 coerces parameters through
#: pydantic TypeAdapters, which is why pyproject.toml keeps typer below 0.29).
LISTING = """
import sys
sys.argv = ["chronicle", *sys.argv[1:]]
from chronicle.runtime.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = ("anthropic", "openai", "mcp", "asyncio", "psycopg", "psycopg_pool", "pydantic", "pydantic_core", "cryptography",
         "eventsourcing", "transitions", "sqlite3",
         "chronicle.domain", "chronicle.runtime.store", "chronicle.runtime.app.queries", "chronicle.runtime.read_models",
         "chronicle.projections.engine", "chronicle.projections.summaries", "chronicle.projections.cost",
         "chronicle.runtime.loop", "chronicle.runtime.tools", "chronicle.runtime.providers", "typer._adapters")
print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
"""


def test_sessions_on_current_read_models_imports_neither_the_domain_nor_the_store(db_url):
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.read_models import caught_up
    from chronicle.runtime.sessions import start_session
    from chronicle.runtime.store import open_store_at

    store = open_store_at(db_url)
    session, _ = start_session(store, AgentSpec(name="main"), "hello")
    caught_up(store)
    store.close()
    env = {"PATH": "/usr/bin:/bin", "CHRONICLE_DB": db_url, "COLUMNS": "120"}
    for args in (["sessions"], ["sessions", "--json"], ["sessions", "--all"]):
        out = subprocess.run([sys.executable, "-c", LISTING, *args], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert str(session.id)[:8] in out.stdout, out.stdout
        loaded = ast.literal_eval(out.stdout.splitlines()[-1])
        if db_url.startswith("postgresql"):  # one psycopg connection, no pool; psycopg imports asyncio itself
            loaded = [m for m in loaded if m.split(".")[0] not in ("asyncio", "psycopg")]
        else:  # and a SQLite store's listing the SQLite driver alone
            loaded = [m for m in loaded if m.split(".")[0] != "sqlite3"]
        assert loaded == [], f"chronicle {' '.join(args)} imported {loaded}"


def test_a_bad_environment_value_is_still_refused_before_a_read_command_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'chronicle.db'}"
    from chronicle.runtime.store import open_store_at

    open_store_at(url)
    env = {"PATH": "/usr/bin:/bin", "CHRONICLE_DB": url, "CHRONICLE_HTTP_TIMEOUT_S": "abc"}
    out = subprocess.run([sys.executable, "-m", "chronicle.runtime.cli", "sessions"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2 and "CHRONICLE_HTTP_TIMEOUT_S" in out.stderr, out.stderr


HELP = """
import sys
sys.argv = ["chronicle", "--help"]
from chronicle.runtime.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
from chronicle.runtime.cli.app import COMMANDS
modules = {f"chronicle.runtime.cli.{entry.target.split(':')[0]}" for entry in COMMANDS}
print(sorted(m for m in sys.modules if m in modules or m.startswith(("chronicle.runtime.store", "eventsourcing"))))
"""


def test_the_root_help_lists_every_command_without_importing_one():
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-c", HELP], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    from chronicle.runtime.cli.app import COMMANDS
    from chronicle.runtime.cli.help_index import HELP_LINES

    for entry in COMMANDS:
        assert f" {entry.name} " in out.stdout, entry.name
    assert HELP_LINES["sessions"][:40] in out.stdout and entry.panel in out.stdout
    assert out.stdout.splitlines()[-1] == "[]", f"chronicle --help imported {out.stdout.splitlines()[-1]}"


def test_the_help_index_holds_each_commands_own_help_line():
    """`help_index.py` is written from the commands; rewrite it with CHRONICLE_WRITE_HELP=1 when one changes."""
    from chronicle.runtime.cli import help_index
    from chronicle.runtime.cli.app import help_lines

    lines = help_lines()
    if os.environ.get("CHRONICLE_WRITE_HELP"):
        path = Path(help_index.__file__)
        head = path.read_text(encoding="utf-8").split("HELP_LINES = {")[0]
        body = "".join(f"    {name!r}: {line!r},\n" for name, line in lines.items())
        path.write_text(f"{head}HELP_LINES = {{\n{body}}}\n", encoding="utf-8")
        help_index.HELP_LINES = lines
    assert help_index.HELP_LINES == lines, "a command's help changed: rewrite help_index.py with CHRONICLE_WRITE_HELP=1"


OPEN = """
import sys
from chronicle.runtime.store import ChronicleStore
ChronicleStore(sys.argv[1]).close()
print(sorted(m for m in sys.modules if m.startswith(("pydantic_settings", "cryptography", "chronicle.runtime.shredding"))))
"""


def test_opening_a_plain_store_on_either_backend_skips_settings_and_cipher_imports(db_url):
    # The connect timeout is read through pydantic-settings only when it is set, and the cipher
    # code only for an encrypted store: each was ≈ 20–40 ms of every PostgreSQL command's start.
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", OPEN, db_url], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    set_ = subprocess.run([sys.executable, "-c", OPEN, db_url], capture_output=True, text=True, timeout=60,
                          env={**env, "CHRONICLE_PG_CONNECT_TIMEOUT": "3"})
    assert set_.returncode == 0, set_.stderr
    assert ("pydantic_settings" in set_.stdout) == db_url.startswith("postgresql")  # a set value is validated


#: What replaying a session's events for `log` never needs: a pydantic model (the domain imports
#: its content models and AgentSpec in the methods that build them), pydantic's plugin registry
#: (importlib.metadata, read when a first model is built), the read models with every projection
#: and the price table; nor pydantic-core for a short log (runtime/transcoder.py, runtime/jsonable.py).
#: Nor `transitions`: replayed events apply their change without asking a lifecycle (domain/lifecycle.py).
LOG_HEAVY = ("pydantic", "pydantic_core", "annotated_types", "importlib.metadata", "chronicle.domain.content", "chronicle.domain.agent_spec",
             "chronicle.domain.skill", "chronicle.runtime.read_models", "chronicle.runtime.pricing", "chronicle.projections.history",
             "transitions")
#: `history` of the present builds its messages from events: time travel (the tools, asyncio) is for --at/--version,
#: and recorded blocks already in wire form are shown without the content models (domain/context_wire.py).
HISTORY_HEAVY = ("pydantic", "annotated_types", "chronicle.domain.content", "transitions",
                 "asyncio", "chronicle.runtime.tools", "chronicle.runtime.timetravel", "chronicle.runtime.past_context",
                 "chronicle.runtime.past_wire", "chronicle.runtime.read_models")

PROBE_ARGV = """
import sys
heavy = tuple(sys.argv[1].split(","))
sys.argv = ["chronicle", *sys.argv[2:]]
from chronicle.runtime.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
"""


def test_log_replays_without_pydantic_and_history_of_the_present_without_time_travel(tmp_path):
    from tests.helpers import cli

    demo = cli("demo", "--dir", str(tmp_path / "demo"))  # turns, tool calls (one failed), a title
    assert demo.returncode == 0, demo.stderr
    url = f"sqlite:///{tmp_path / 'demo' / 'chronicle.db'}"
    sid = json.loads(cli("sessions", "--json", db=url).stdout.splitlines()[0])["session_id"]
    env = {"PATH": "/usr/bin:/bin", "CHRONICLE_DB": url, "COLUMNS": "120"}
    cases = [(LOG_HEAVY, ["log", sid[:8], "--no-pager"], "tool_call"), (LOG_HEAVY, ["log", sid, "--json"], '"tool_call"'),
             (HISTORY_HEAVY, ["history", sid[:8], "--no-pager"], "assistant"), (HISTORY_HEAVY, ["history", sid, "--json"], "tool_result")]
    for heavy, args, shown in cases:
        out = subprocess.run([sys.executable, "-c", PROBE_ARGV, ",".join(heavy), *args], capture_output=True, text=True,
                             timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert shown.lower() in out.stdout.lower(), out.stdout[:2000]
        assert out.stdout.splitlines()[-1] == "[]", f"chronicle {' '.join(args)} imported {out.stdout.splitlines()[-1]}"


COMMAND_HELP = r"""
import contextlib, io, json, sys
from chronicle.runtime.cli.entry import main
shown = {}
for command in sys.argv[1:]:
    sys.argv = ["chronicle", command, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            main()
    except SystemExit as exc:
        assert not exc.code, (command, exc.code)
    shown[command] = out.getvalue()
heavy = ("pydantic", "anthropic", "openai", "psycopg", "mcp")
print(json.dumps({"shown": shown, "heavy": sorted(m for m in sys.modules if m.startswith(heavy))}))
"""

#: Commands whose use cases import the loop, pydantic, the providers or the MCP SDK, which their
#: --help does not need (runtime/cli/lazy.py).
ACTING = ["run", "chat", "demo", "steer", "cancel", "compact", "undo", "redo", "fork", "replay", "approve", "deny", "resume",
          "submit", "worker", "routines", "jobs", "skills", "projections", "mcp"]


def test_the_help_of_a_command_that_acts_imports_neither_pydantic_nor_a_provider():
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-c", COMMAND_HELP, *ACTING], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["heavy"] == []
    for command in ACTING:
        assert f"Usage: chronicle {command}" in result["shown"][command], command
    assert "--budget-usd" in result["shown"]["run"] and "--lease-s" in result["shown"]["worker"]
    assert "--files" in result["shown"]["undo"] and "--wait-batch" in result["shown"]["steer"]


PAST = """
import sys
import chronicle.runtime.past_context, chronicle.runtime.past_wire, chronicle.runtime.timetravel
from chronicle.projections import history
from chronicle.runtime import past_context
heavy = ("asyncio", "chronicle.runtime.tools", "chronicle.runtime.loop", "chronicle.runtime.providers")
print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
print(history._BLOCKS.pydantic_complete, past_context.MESSAGES.pydantic_complete)
"""


def test_reading_the_past_imports_no_tools_and_builds_no_block_schema_until_one_is_validated():
    """`history --at`, `fork`: the tools package (and the asyncio its tools use) is only for restoring
    files, and the blocks' schema (18 ms to build) only for the rare message that is validated."""
    out = subprocess.run([sys.executable, "-c", PAST], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded, built = out.stdout.splitlines()
    assert loaded == "[]", loaded
    assert built == "False False"


#: A read command as the `chronicle` executable runs it, counting the cyclic collector's passes.
COLLECTIONS = """
import gc, sys
passes = []  # one per collection: whether start-up was over (what it built frozen) when it ran
gc.callbacks.append(lambda phase, info: passes.append(gc.get_freeze_count() > 0) if phase == "start" else None)
defaults = gc.get_threshold()
sys.argv = ["chronicle", *sys.argv[1:]]
from chronicle.runtime.cli.entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(passes.count(False), gc.get_freeze_count() > 0, gc.get_threshold() == defaults)
"""


def test_a_read_command_starts_without_collecting_and_its_own_work_is_collected_as_usual(tmp_path):
    """Start-up (importing the command, opening the store) allocates tens of thousands of objects that
    live as long as the process: the collector walked them dozens of times per command (20-40 % of
    a `log`), for no garbage. They are frozen once the store is open, and the thresholds return."""
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session
    from chronicle.runtime.store import open_store_at

    url = f"sqlite:///{tmp_path / 'chronicle.db'}"
    store = open_store_at(url)
    session, _ = start_session(store, AgentSpec(name="main"), "hello")
    store.close()
    env = {"PATH": "/usr/bin:/bin", "CHRONICLE_DB": url, "COLUMNS": "120"}
    for args in (["log", str(session.id)], ["history", str(session.id), "--json"]):
        out = subprocess.run([sys.executable, "-c", COLLECTIONS, *args], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        passes, frozen, restored = out.stdout.splitlines()[-1].split()
        # Only the imports that reach `entry.main` come before the hold (2 young passes); the command's
        # own work after start-up is not counted here, however it grows.
        assert int(passes) <= 3 and frozen == "True" and restored == "True", f"chronicle {' '.join(args)}: {out.stdout[-300:]}"
