"""chat's history file is a second copy of everything typed, beside the store: it keeps lines with
their secrets cut as the store cuts them, while this session's Up arrow still recalls them as typed."""

from __future__ import annotations

from prompt_toolkit.history import FileHistory

from chronicle.runtime.cli.chat_input import _redacted

KEY = "sk-ant-api03-Tq8vX2mN4pL7rT1wY6bK9cF3hJ5dG0sA8eQ2uI4oP7lM1nB3vC6xZ9kH2jD5fS8gA-Xy12Ab"


def test_the_history_file_keeps_typed_lines_without_their_secrets(tmp_path):
    path = tmp_path / "chat_history"
    history = _redacted(FileHistory)(str(path))
    history.append_string(f"use the key {KEY} for the deploy")
    history.append_string("list the files")
    written = path.read_text(encoding="utf-8")
    assert KEY not in written and "use the key" in written and "list the files" in written
    assert history.get_strings()[-2] == f"use the key {KEY} for the deploy", "recalled as typed in this session"
    reloaded = list(FileHistory(str(path)).load_history_strings())  # a later chat's Up arrow: newest first
    assert reloaded[1].startswith("use the key ") and KEY not in "".join(reloaded)
