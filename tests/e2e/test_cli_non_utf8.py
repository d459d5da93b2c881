"""Bytes that are not UTF-8 (Python's lone surrogates for them, in an argument, stdin or a path, or a `\\udce9` escape in
a model's response) failed as `internal error: UnicodeEncodeError … surrogates not allowed`, a first `run` leaving an
empty store behind. Text for the model is taken with U+FFFD for each such byte, said on stderr; a workspace whose path
is not UTF-8 is refused before anything is recorded; a response is mended where it is taken in (runtime/model_call.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import processes
from tests.helpers import cli, json_lines, response, text, tool_use, write_script

BAD = os.fsdecode(b"caf\xe9")  # "caf\udce9": what Python makes of a latin-1 argument


def _texts(db: str, sid: str) -> list[str]:
    return [block.get("text") or str(block.get("input") or block.get("content"))
            for message in json_lines(cli("history", sid, "--json", db=db).stdout) for block in message["content"]]


def _session(db: str) -> str:
    return str(json_lines(cli("sessions", "--json", db=db).stdout)[0]["session_id"])


def test_a_prompt_in_an_argument_or_on_stdin_takes_u_fffd_for_each_byte_that_is_not_utf8(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("one"))], )
    run = cli("run", f"prompt {BAD}", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert "note: the prompt held 1 byte that is not UTF-8: it is taken as U+FFFD (\ufffd)" in run.stderr
    sid = _session(sqlite_url)
    assert "prompt caf\ufffd" in _texts(sqlite_url, sid)

    script2 = write_script(tmp_path / "s2.json", [response(text("two"))])
    piped = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "run", "-", "--provider", f"scripted:{script2}",
                             "--session", sid], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "CHRONICLE_DB": sqlite_url, "PYTHONIOENCODING": "utf-8:strict"})
    out, err = piped.communicate(b"diff \xff\xfe end\n", timeout=60)
    assert piped.returncode == 0, err.decode()
    assert "stdin held 2 bytes that are not UTF-8" in err.decode()
    assert "diff \ufffd\ufffd end\n" in _texts(sqlite_url, sid)

    steered = cli("steer", sid, f"then {BAD}", db=sqlite_url)  # no turn runs: queued as the next input
    assert steered.returncode == 0, steered.stderr
    audit = cli("audit", "--tool", BAD, db=sqlite_url)
    assert audit.returncode == 0 and "no matching decisions" in audit.stdout, audit.stderr


def test_chat_takes_a_line_that_is_not_utf8(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    chat = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "chat", "--provider", f"scripted:{script}",
                            "--workspace", str(workspace)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env={**os.environ, "CHRONICLE_DB": sqlite_url, "PYTHONIOENCODING": "utf-8:strict"})
    out, err = chat.communicate(b"hello \xe9\n", timeout=60)
    assert chat.returncode == 0, err.decode()
    assert "hello \ufffd" in _texts(sqlite_url, _session(sqlite_url))


def test_a_workspace_whose_path_is_not_utf8_is_refused_before_anything_is_recorded(tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    latin = Path(os.fsdecode(bytes(tmp_path) + b"/ws\xe9"))
    latin.mkdir()
    store = tmp_path / "store" / "c.db"
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(latin), db=f"sqlite:///{store}")
    assert run.returncode == 2, run.stderr
    assert f"workspace {tmp_path}/ws\\xe9 is not a UTF-8 path" in run.stderr and "rename the directory" in run.stderr
    assert not store.exists()
    assert "internal error" not in run.stderr


def test_a_lone_surrogate_in_a_model_response_is_mended_not_a_failed_turn(sqlite_url, workspace, tmp_path):
    """A response whose JSON holds `"\\udce9"` (the model echoing a latin-1 name it was shown) failed the turn as
    `internal error: UnicodeEncodeError`: recorded, it is U+FFFD, and the tool's own error says what it could not find."""
    script = write_script(tmp_path / "s.json", [response(text(f"reading {BAD}"), tool_use("r1", "read_file", path=f"{BAD}.txt")),
                                                 response(text("done"))])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert "no such file: caf\ufffd.txt" in run.stdout
    texts = _texts(sqlite_url, _session(sqlite_url))
    assert "reading caf\ufffd" in texts and "{'path': 'caf\ufffd.txt'}" in texts and "done" in texts


def test_a_surrogate_no_client_cleaned_is_a_usage_error_naming_it_not_an_internal_error():
    from chronicle.runtime.app.errors import known_failure

    try:
        BAD.encode("utf-8")
    except UnicodeEncodeError as exc:
        known = known_failure(exc)
    assert known is not None and known.code == 2
    assert str(known) == ("a text given holds a byte that is not UTF-8 ('\\udce9' at 3); Chronicle records text as UTF-8: "
                          "give it as UTF-8")



def _raw(args: list[str], db: str, env: dict[str, str]) -> tuple[int, str, str]:
    """`chronicle ARGS` in `env`, its output read as latin-1 (every byte is a character: what it wrote, undecoded)."""
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, "CHRONICLE_DB": db, "COLUMNS": "200", **env})
    out, err = process.communicate(timeout=60)
    return process.returncode, out.decode("latin-1"), err.decode("latin-1")


def test_a_terminal_whose_encoding_is_not_utf8_gets_escapes_and_json_that_is_still_json(sqlite_url, workspace, tmp_path):
    """`PYTHONIOENCODING=latin-1 chronicle sessions` (or LC_ALL=C without UTF-8 mode) failed nearly every command with
    UnicodeEncodeError on the CLI's own `…` and `—`, and `--json` on any character the encoding lacks."""
    said = "caf\u00e9 \u65e5\u672c \U0001f680 \u2026"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(text(said))], [response(text("more"))]]},
                                  "title": ["T\u00eates \u2014 " + "long " * 10]}))
    ran = cli("run", f"go {said}", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    sid = _session(sqlite_url)
    for env in ({"PYTHONIOENCODING": "latin-1"}, {"PYTHONIOENCODING": "ascii"},
                {"PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "LC_ALL": "C", "LANG": "C"}):
        for args in (["sessions"], ["log", sid], ["history", sid, "--no-pager"], ["audit"], ["why", sid], ["nonsense"]):
            code, out, err = _raw(args, sqlite_url, env)
            assert code == (2 if args == ["nonsense"] else 0), (env, args, err)
            assert "UnicodeEncodeError" not in err and "internal error" not in err, (env, args, err)
        assert "\\u65e5\\u672c \\U0001f680" in _raw(["history", sid], sqlite_url, env)[1], env
        for args in (["sessions", "--json"], ["log", sid, "--json"], ["history", sid, "--json"], ["audit", "--json"]):
            code, out, err = _raw(args, sqlite_url, env)
            assert code == 0 and out.isascii(), (env, args, err)
            assert json_lines(out)  # JSON, whatever it holds
        assert said in json.dumps(json_lines(_raw(["history", sid, "--json"], sqlite_url, env)[1]), ensure_ascii=False)
    code, out, err = _raw(["run", "more \u2014", "--session", sid, "--provider", f"scripted:{script}", "--json"], sqlite_url,
                          {"PYTHONIOENCODING": "ascii"})
    assert code == 0 and out.isascii() and json_lines(out)[-1]["type"] == "agent_end", err
