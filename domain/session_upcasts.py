"""How Session records written by earlier versions are read today: its snapshots, Started and TurnEnded.

They live apart from the aggregate because they only ever grow: each schema change adds a step,
and no step goes while a store may still hold that shape (tests/fixtures/v1_store.db does). The
Session and its events name them as their `upcast_vN_vN+1`, which is where eventsourcing
looks for them.
"""

from __future__ import annotations

from typing import Any


def fork_origin(forked_from: dict[str, Any] | None, inherited: int) -> dict[str, Any] | None:
    """The one shape of a fork's origin: {"session_id", "turn"}, the turn numbered as the conversation shows it.

    Chat's /fork once recorded {"session_id", "turn_id"} (the parent's last turn on the branch);
    it forked at the end of the branch, so its turn number is the count of turns it inherited."""
    if not forked_from or "turn" in forked_from:
        return forked_from
    return {"session_id": forked_from.get("session_id"), "turn": inherited}


def snapshot_v1_v2(state: dict[str, Any]) -> None:
    """v2 added `title_error` (a failed title call is recorded), steering, cancel requests,
    compaction attempts and auxiliary calls; v1 snapshots gain them empty."""
    state.setdefault("title_error", None)
    state.setdefault("steering", [])
    state.setdefault("cancel_requested", None)
    state.setdefault("compaction_attempts", 0)
    state.setdefault("aux_calls", [])


def snapshot_v2_v3(state: dict[str, Any]) -> None:
    """v3: `forked_from` has one shape, {"session_id", "turn"} (see `fork_origin`)."""
    # A snapshot knows the head now, not at the fork: inherited turns are those on it that are not its own.
    own = set(state.get("turns") or [])
    inherited = [t for t in state.get("head") or [] if t not in own]
    state["forked_from"] = fork_origin(state.get("forked_from"), len(inherited))


def snapshot_v3_v4(state: dict[str, Any]) -> None:
    """v4: `archived` (hidden from `sessions` unless --all); older snapshots were not archived."""
    state.setdefault("archived", False)


def snapshot_v4_v5(state: dict[str, Any]) -> None:
    """v5: `model_changes` (each ModelChanged); older snapshots run on the model their spec recorded."""
    state.setdefault("model_changes", [])


def snapshot_v5_v6(state: dict[str, Any]) -> None:
    """v6: `input_origins` (the channel and sender of inputs a channel queued) and `replies` (what was
    sent back to the channel for a turn); older sessions had neither."""
    state.setdefault("input_origins", {})
    state.setdefault("replies", {})


def snapshot_v6_v7(state: dict[str, Any]) -> None:
    """v7: `pending_auth` (a credential a tool waits for, seed 001's auth mode); older sessions waited for none."""
    state.setdefault("pending_auth", None)


def snapshot_v7_v8(state: dict[str, Any]) -> None:
    """v8: `files_owed` (an undo/redo --files whose file writes are not recorded yet); none was before."""
    state.setdefault("files_owed", None)


def snapshot_v8_v9(state: dict[str, Any]) -> None:
    """v9: `compactions`, every Compacted (an undo past the newest leaves an earlier one holding). A v8 snapshot
    kept only the newest: that one is all such a session knows of those made before the snapshot."""
    from .context_wire import compaction_entry

    compaction = state.get("compaction")
    state.setdefault("compactions", [compaction_entry(compaction)] if compaction else [])


def files_not_asked(state: dict[str, Any]) -> None:
    """TurnsUndone/TurnsRedone v3 say whether the files were asked for; older ones recorded the
    undo of the conversation only (an older undo --files recorded its FilesRestored with it)."""
    state.setdefault("files", False)
    state.setdefault("workspace", None)


def input_v1_v2(state: dict[str, Any]) -> None:
    """Inputs before channels recorded where they came from: none said, so none is known."""
    state.setdefault("origin", None)


def reply_v1_v2(state: dict[str, Any]) -> None:
    """Replies before routines could notify a channel were a channel input's answer."""
    state.setdefault("routine", None)


def turn_ended_v1_v2(state: dict[str, Any]) -> None:
    """TurnEnded v2 has no `status`: the turn's outcome is recorded once, on the Turn."""
    state.pop("status", None)


def started_v1_v2(state: dict[str, Any]) -> None:
    """An event knows the head at the fork: every turn on it was inherited."""
    state["forked_from"] = fork_origin(state.get("forked_from"), len(state.get("head") or []))
