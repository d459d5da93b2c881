"""Random sequences of public operations on one store, and what must hold after every one of them.

A hypothesis state machine drives `Chronicle` (and, where the library has no method for it, the use case the CLI
calls: `verify`, `export`/`import`, `forget`) on a real SQLite file and on a fresh PostgreSQL schema: turns with
tool calls (one that works, one that raises ToolError, one that crashes, arguments of the wrong type, a tool that
does not exist, a provider that fails), new sessions, forks at any turn, undo N / redo, compaction, steering
between turns, forget, and export + import into a second store. Its model is small: which sessions exist, the
tree each belongs to, how many turns each shows, which turns are on its branch, and every text it was given.

After every step (`invariants`):
- `verify` passes on both stores, and the head of the previous step still holds as an anchor: the log only grew
  (forget included: it destroys a key, never an event);
- the read models rebuilt from position 0 equal the incrementally maintained ones;
- for every turn k of every live session, `history(at=k)` equals the conversation rebuilt from events (the oracle
  of tests/integration/test_history_wire.py) and what it was when first read: the past never changes;
- `history()` equals the typed path (build_context, then wire) and the session as of its latest event; when the
  branch is again what it was at the end of turn k (undo, redo) and nothing was compacted, it equals history(at=k);
- a fork reads, just after it was made, what its parent read at the fork point;
- a forgotten tree: every command on it is ChronicleError code 1, no text of it in `sessions`, `audit`, any other
  session's history or export (and, when it is forgotten, not in the database's bytes), and `verify` still passes;
- an imported session reads on the target as it read on the source when it was exported.

CI runs a few derandomized examples per backend (6 on SQLite, 3 on PostgreSQL, 12 steps each). To hunt for bugs, run more random ones:
    CHRONICLE_STATEFUL_EXAMPLES=200 pytest tests/api/test_public_api_stateful.py
(any value turns derandomize off; CHRONICLE_STATEFUL_STEPS sets the steps per example, default 12).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from chronicle import Agent, Chronicle, ChronicleError, ToolError, tool
from chronicle.runtime.app import forget as forgetting
from chronicle.runtime.app import queries
from chronicle.runtime.bundle import BundleError, check_bundle, export_bundle, import_bundle
from chronicle.runtime.past_context import history_engine
from chronicle.runtime.past_wire import wire_at_turn
from chronicle.runtime.read_models import projection_engine
from chronicle.runtime.timetravel import as_of_turn
from chronicle.runtime.verify import Verifier
from tests.helpers import response, text, tool_use
from tests.integration.test_history_wire import oracle, printed
from tests.store_dump import dump_store, holds

HUNTING = os.environ.get("CHRONICLE_STATEFUL_EXAMPLES")
#: Examples per backend in CI: PostgreSQL's schema per store and its read models' DDL make a step ~3x SQLite's.
EXAMPLES = {"sqlite": int(HUNTING or 6), "postgres": int(HUNTING or 3)}
STEPS = int(os.environ.get("CHRONICLE_STATEFUL_STEPS") or 12)


@tool(read_only=True)
def lookup(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: The order's id, like "A-42".
    """
    if not order_id.startswith("A-"):
        raise ToolError(f"no order {order_id}")
    return f"order {order_id}: shipped"


@tool
def explode(why: str) -> str:
    """A tool with a bug in it.

    Args:
        why: Said in the error.
    """
    raise RuntimeError(f"crashed: {why}")


# -- what a turn does: the model's answers, as the scripted provider gives them -------------------------------------

CALLS = ("ok", "tool_error", "crash", "bad_arguments", "unknown_tool")
PLANS = st.one_of(
    st.just(("text", ())),
    st.tuples(st.just("tools"), st.lists(st.sampled_from(CALLS), min_size=1, max_size=3)),
    st.just(("provider_error", ())),
)


def answers(plan: tuple[str, tuple[str, ...]], tag: str) -> list[dict[str, Any]]:
    """The responses of every model call of a turn (the script is flat: each turn of the run reads the same)."""
    kind, calls = plan
    if kind == "provider_error":
        return [{"error": {"kind": "overloaded", "message": f"down {tag}", "retryable": False}, "stop_reason": "error"}]
    if kind == "text":
        return [response(text(f"answer {tag}"))]
    def made(call: str, i: int) -> tuple[str, dict[str, Any]]:  # inputs differ: three alike in a row is a doom loop
        return {"ok": ("lookup", {"order_id": f"A-{tag}-{i}"}), "tool_error": ("lookup", {"order_id": f"B-{tag}-{i}"}),
                "crash": ("explode", {"why": f"why {tag} {i}"}), "bad_arguments": ("lookup", {"order_id": i}),
                "unknown_tool": ("no_such_tool", {"x": f"{tag} {i}"})}[call]

    uses = [tool_use(f"tu_{tag}_{i}", made(call, i)[0], **made(call, i)[1]) for i, call in enumerate(calls)]
    return [response(text(f"calling {tag}"), *uses), response(text(f"answer {tag}"))]


# -- the model --------------------------------------------------------------------------------------------------------


@dataclass
class Modelled:
    sid: str
    tree: str
    inherited: list[int]  # the parent's turns (as its conversation numbers them) this fork starts with
    own: int = 0  # turns run in this session
    head: list[int] = field(default_factory=list)  # the branch, as conversation turn numbers
    ends: dict[int, list[int]] = field(default_factory=dict)  # the branch at the end of each own turn
    redo: list[list[int]] = field(default_factory=list)
    compacted: bool = False
    queued: int = 0  # inputs waiting: steering given between turns, a prompt left after a turn failed
    texts: list[str] = field(default_factory=list)  # every text this session was given or answered
    past: dict[int, str] = field(default_factory=dict)  # history(at=k) as first read

    @property
    def turns(self) -> int:
        return len(self.inherited) + self.own

    def branch_at(self, k: int) -> list[int]:
        return list(range(1, k + 1)) if k <= len(self.inherited) else self.ends[k]


class PublicApi(RuleBasedStateMachine):
    """One store (and an import target); the backend's URLs come from `new_url`, set by the test."""

    new_url: Callable[[Path, str], str]

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="stateful-"))
        self.workspace = self.root / "workspace"
        self.workspace.mkdir()
        self.script = self.root / "script.json"
        self.script.write_text(json.dumps({"agents": {"main": [response(text("unused"))]}}), encoding="utf-8")
        self.agent = Agent(tools=[lookup, explode], provider=f"scripted:{self.script}")
        self.app = Chronicle(self.new_url(self.root, "source"))
        self.target = Chronicle(self.new_url(self.root, "target"))
        self.sessions: list[Modelled] = []
        self.forgotten: list[Modelled] = []
        self.imported: dict[str, tuple[str, dict[int, str]]] = {}  # sid -> history() and history(at=k) when exported
        self.anchors: dict[str, dict[str, Any] | None] = {"source": None, "target": None}
        self.counter = 0

    def teardown(self) -> None:
        try:
            self.rebuilt_equal(self.app)
        finally:
            self.close()

    def close(self) -> None:
        self.app.close()
        self.target.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------------------------------------

    def tag(self) -> str:
        self.counter += 1
        return f"Tag{self.counter:03d}Mark"

    def pick(self, index: int) -> Modelled:
        return self.sessions[index % len(self.sessions)]

    def turn(self, session: Modelled | None, plan: tuple[str, tuple[str, ...]]) -> Modelled:
        tag = self.tag()
        self.script.write_text(json.dumps({"agents": {"main": answers(plan, tag)}}), encoding="utf-8")
        prompt = f"prompt {tag}"
        result = self.app.run_sync(self.agent, prompt, session=session.sid if session else None, workspace=self.workspace)
        expected = "failed" if plan[0] == "provider_error" else "completed"
        assert result.status == expected, result
        if session is None:
            session = Modelled(result.session_id, result.session_id, [])
            self.sessions.append(session)
        session.texts += [prompt, tag]
        waiting = session.queued + 1  # inputs queued between turns run first, in order, one turn each,
        ran = 1 if expected == "failed" else waiting  # as long as each completes: after a failure the rest wait
        for _ in range(ran):
            session.own += 1
            session.head.append(session.turns)
            session.redo = []
            session.ends[session.turns] = list(session.head)
        session.queued = waiting - ran
        return session

    def history(self, session: Modelled, **moment: Any) -> str:
        return printed(self.app.history(session.sid, **moment))

    # -- rules --------------------------------------------------------------------------------------------------------

    @rule(plan=PLANS)
    def start_a_session(self, plan):
        self.turn(None, plan)

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50), plan=PLANS)
    def run_a_turn(self, which, plan):
        self.turn(self.pick(which), plan)

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50))
    def steer_between_turns(self, which):
        session = self.pick(which)
        words = f"steer {self.tag()}"
        assert self.app.steer(session.sid, words)["outcome"] == "queued"
        session.queued += 1
        session.texts.append(words)

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50), at=st.none() | st.integers(1, 50))
    def fork(self, which, at):
        parent = self.pick(which)
        if at is None and not parent.head:
            with pytest.raises(ChronicleError, match="no turn on its branch"):
                self.app.fork(parent.sid)
            return
        given = None if at is None else 1 + (at - 1) % parent.turns
        at = parent.head[-1] if given is None else given  # None: the end of the branch
        before = self.history(parent, at=at)
        child = Modelled(self.app.fork(parent.sid, at=given), parent.tree, parent.branch_at(at))
        child.head = list(range(1, len(child.inherited) + 1))
        child.texts = list(parent.texts)  # what it inherits is of the same tree; forget erases both
        child.compacted = parent.compacted
        self.sessions.append(child)
        assert self.history(child) == before, "a fork reads what its parent read at the fork point"

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50), turns=st.integers(1, 4))
    def undo(self, which, turns):
        session = self.pick(which)
        head = self.app.store.max_position()
        if turns > len(session.head):
            with pytest.raises(ChronicleError) as refused:
                self.app.undo(session.sid, turns)
            assert refused.value.code == 2 and self.app.store.max_position() == head, refused.value
            return
        assert len(self.app.undo(session.sid, turns)["undone"]) == turns
        session.redo.append(session.head[-turns:])
        session.head = session.head[:-turns]

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50))
    def redo(self, which):
        session = self.pick(which)
        if not session.redo:
            head = self.app.store.max_position()
            with pytest.raises(ChronicleError) as refused:
                self.app.redo(session.sid)
            assert refused.value.code == 1 and self.app.store.max_position() == head, refused.value
            return
        assert len(self.app.redo(session.sid)["redone"]) == len(session.redo[-1])
        session.head += session.redo.pop()

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50), strategy=st.sampled_from(["summary", "truncate"]), keep=st.integers(0, 2))
    def compact(self, which, strategy, keep):
        session = self.pick(which)
        done = self.app.compact(session.sid, strategy, keep)
        if done["ok"]:
            session.compacted = True

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50))
    def forget(self, which):
        tree = self.pick(which).tree
        gone = [s for s in self.sessions if s.tree == tree]
        erased = forgetting.forget(self.app.store, UUID(gone[0].sid))
        assert {str(s) for s in erased.session_ids} == {s.sid for s in gone}
        self.sessions = [s for s in self.sessions if s.tree != tree]
        self.forgotten += gone
        raw = dump_store(self.app.url)
        kept = {t for s in self.sessions for t in s.texts}
        assert [t for s in gone for t in s.texts if t not in kept and holds(raw, t)] == []

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50))
    def export_and_import(self, which):
        session = self.pick(which)
        bundle = json.loads(json.dumps(export_bundle(self.app.store, UUID(session.sid))))
        self.no_forgotten_text(json.dumps(bundle))
        checked = check_bundle(bundle)
        if session.sid in self.imported:
            held = self.target.store.max_position()
            with pytest.raises(BundleError, match="already holds"):
                import_bundle(self.target.store, checked)
            assert self.target.store.max_position() == held
            return
        import_bundle(self.target.store, checked)
        self.rebuilt_equal(self.target)
        self.imported[session.sid] = (self.history(session), {k: self.history(session, at=k) for k in range(1, session.turns + 1)})

    @precondition(lambda self: self.sessions)
    @rule(which=st.integers(0, 50))
    def replay(self, which):
        session = self.pick(which)
        done = self.app.replay(session.sid, self.workspace)
        assert done["identical"], done

    # -- invariants ---------------------------------------------------------------------------------------------------

    def no_forgotten_text(self, shown: str) -> None:
        kept = {t for s in self.sessions for t in s.texts}
        assert [t for s in self.forgotten for t in s.texts if t not in kept and t in shown] == []

    @invariant()
    def the_log_verifies_and_only_grew(self):
        for name, app in (("source", self.app), ("target", self.target)):
            verdict = Verifier(app.store).verify_all(self.anchors[name])
            assert verdict.ok, verdict.line()
            self.anchors[name] = verdict.head

    @staticmethod
    def rebuilt_equal(app: Chronicle) -> None:
        """Checked when an example ends (the read models then hold every step of it, applied one by one) and on the
        target after each import: a rebuild drops and creates every table, on PostgreSQL most of a step's time."""
        engine = projection_engine(app.store)
        engine.catch_up()
        incremental = {name: engine.dump(name) for name in engine.projections}
        engine.rebuild()
        assert {name: engine.dump(name) for name in engine.projections} == incremental

    @invariant()
    def every_past_reads_as_the_events_say_and_never_changes(self):
        store = self.app.store
        engine = history_engine(store)
        for s in self.sessions:
            sid = UUID(s.sid)
            for k in range(1, s.turns + 1):
                shown = self.history(s, at=k)
                assert shown == printed(oracle(as_of_turn(store, sid, k))), (s.sid, k)
                fast = wire_at_turn(store, sid, k, engine)
                assert fast is None or printed(fast) == shown, (s.sid, k)
                assert s.past.setdefault(k, shown) == shown, (s.sid, k)

    @invariant()
    def the_present_reads_as_the_events_say(self):
        for s in self.sessions:
            now = self.history(s)
            assert now == printed([m.wire() for m in queries.history_messages(self.app.store, s.sid)]), s.sid
            version = self.app.store.session(UUID(s.sid)).version
            assert self.history(s, version=version) == now, s.sid
            if not s.compacted:
                same = [k for k in range(1, s.turns + 1) if s.branch_at(k) == s.head]
                for k in same:
                    assert now == self.history(s, at=k), (s.sid, k, "the branch is as it was at the end of that turn")

    @invariant()
    def why_names_a_call_by_the_turn_audit_gives_it_and_saw_what_history_shows(self):
        """After undo, redo and forks, `why` numbers turns as `audit` and `history --at` do (it once counted branch
        places), and what it says the model saw is that step's request."""
        for s in self.sessions:
            rows = [r for r in self.app.audit(session=s.sid) if r["kind"] == "tool_call" and r["session_id"] == s.sid]
            for row in rows[-2:]:
                chain = self.app.why(s.sid, row["tool_call_id"])
                assert (chain["turn"], chain["tool_call"]["tool_call_id"]) == (row["turn"], row["tool_call_id"]), (s.sid, row)
                seen = self.app.history(s.sid, at=chain["turn"], step=chain["step"])
                assert chain["saw"]["messages"] == len(seen), (s.sid, row)

    @invariant()
    def the_listing_counts_what_the_model_counts(self):
        listed = {row["session_id"]: row for row in self.app.sessions(all=True)}
        assert set(listed) == {s.sid for s in self.sessions}
        for s in self.sessions:
            assert (listed[s.sid]["turns"], listed[s.sid]["queued"]) == (len(s.head), s.queued), (s.sid, listed[s.sid])

    @invariant()
    def a_forgotten_tree_is_gone_everywhere_but_the_chain(self):
        if not self.forgotten:
            return
        for s in self.forgotten[-3:]:
            for method, args in ((self.app.history, {}), (self.app.history, {"at": 1}), (self.app.undo, {}), (self.app.fork, {})):
                with pytest.raises(ChronicleError) as refused:
                    method(s.sid, **args)
                assert refused.value.code == 1 and "was forgotten" in str(refused.value), refused.value
        self.no_forgotten_text(json.dumps(self.app.audit()) + json.dumps(self.app.sessions(all=True)))
        for s in self.sessions:
            self.no_forgotten_text(self.history(s))

    @invariant()
    def an_imported_session_reads_as_it_did_when_exported(self):
        for sid, (now, past) in self.imported.items():
            assert printed(self.target.history(sid)) == now, sid
            for k, shown in past.items():
                assert printed(self.target.history(sid, at=k)) == shown, (sid, k)


def _machine(new_url: Callable[[Path, str], str]) -> type[PublicApi]:
    return type("PublicApiOn", (PublicApi,), {"new_url": staticmethod(new_url)})


def run_settings(backend: str) -> settings:
    return settings(max_examples=EXAMPLES[backend], stateful_step_count=STEPS, derandomize=not HUNTING, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.fixture
def cipher(monkeypatch):
    """Forget needs encryption at rest from a store's creation; an import needs the source's key."""
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())


def test_random_public_operations_keep_every_invariant_on_sqlite(cipher):
    run_state_machine_as_test(_machine(lambda root, name: f"sqlite:///{root / name}.db"), settings=run_settings("sqlite"))


def test_random_public_operations_keep_every_invariant_on_postgresql(cipher, pg_database):
    from tests.conftest import fresh_pg_url

    run_state_machine_as_test(_machine(lambda root, name: fresh_pg_url(pg_database)), settings=run_settings("postgres"))


# -- what the machine found, each kept as its own example --------------------------------------------------------------


def test_a_fork_of_a_compacted_session_continues_from_the_conversation_history_at_shows(db_url, workspace, tmp_path):
    """`fork --at TURN` continues "from the conversation as `history --at TURN` shows it" (README): a fork made after a
    compaction read every turn the compaction had left out, where its parent, at that turn, read the compacted ones."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("noted"))]}}), encoding="utf-8")
    agent = Agent(tools=[], provider=f"scripted:{script}")
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "OLD-DETAIL", workspace=workspace).session_id
        app.run_sync(agent, "second", session=sid, workspace=workspace)
        assert app.compact(sid, "truncate", keep=1)["turns_compacted"] == 1
        app.run_sync(agent, "third", session=sid, workspace=workspace)
        parent = app.history(sid, at=3)
        assert "OLD-DETAIL" not in json.dumps(parent)
        child = app.fork(sid, at=3)
        assert app.history(child) == parent
        app.run_sync(agent, "on the fork", session=child, workspace=workspace)
        assert "OLD-DETAIL" not in json.dumps(app.history(child))
