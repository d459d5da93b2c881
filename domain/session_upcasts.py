"""How Session records written by earlier versions are read today: its snapshots and its Started event.

They live apart from the aggregate because they only ever grow: each schema change adds a step,
and no step goes while a store may still hold that shape (tests/fixtures/v1_store.db does). The
Session and Session.Started name them as their `upcast_vN_vN+1`, which is where eventsourcing
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
    state.setdefault("title_error", None)
    state.setdefault("steering", [])
    state.setdefault("cancel_requested", None)
    state.setdefault("compaction_attempts", 0)
    state.setdefault("aux_calls", [])


def snapshot_v2_v3(state: dict[str, Any]) -> None:
    # A snapshot knows the head now, not at the fork: inherited turns are those on it that are not its own.
    own = set(state.get("turns") or [])
    inherited = [t for t in state.get("head") or [] if t not in own]
    state["forked_from"] = fork_origin(state.get("forked_from"), len(inherited))


def snapshot_v3_v4(state: dict[str, Any]) -> None:
    state.setdefault("archived", False)


def snapshot_v4_v5(state: dict[str, Any]) -> None:
    state.setdefault("model_changes", [])


def snapshot_v5_v6(state: dict[str, Any]) -> None:
    state.setdefault("input_origins", {})
    state.setdefault("replies", {})


def input_v1_v2(state: dict[str, Any]) -> None:
    """Inputs before channels recorded where they came from: none said, so none is known."""
    state.setdefault("origin", None)


def reply_v1_v2(state: dict[str, Any]) -> None:
    """Replies before routines could notify a channel were a channel input's answer."""
    state.setdefault("routine", None)


def started_v1_v2(state: dict[str, Any]) -> None:
    """An event knows the head at the fork: every turn on it was inherited."""
    state["forked_from"] = fork_origin(state.get("forked_from"), len(state.get("head") or []))
