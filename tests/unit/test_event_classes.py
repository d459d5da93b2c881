"""domain/event_type.py makes event classes without `dataclasses` compiling their methods. What the
stock way (eventsourcing's metaclass, `dataclass(frozen=True)`) makes is the oracle: every event
class of every aggregate, and instances of each, are described in a process of each kind and the
two descriptions must be equal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

DESCRIBE = r'''
import dataclasses, inspect, json, pkgutil, importlib, uuid
from datetime import datetime, timezone
from eventsourcing.domain import Aggregate, DomainEvent
import chronicle.domain as domain
from chronicle.domain import event_type

for info in pkgutil.iter_modules(domain.__path__):
    importlib.import_module(f"chronicle.domain.{info.name}")

def aggregates():
    seen, todo = [], list(Aggregate.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("chronicle.domain.") and cls not in seen:
            seen.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: c.__qualname__)

def events(aggregate):
    found = {}
    for value in vars(aggregate).values():
        if isinstance(value, type) and issubclass(value, DomainEvent):
            found[value.__qualname__ + "@" + ",".join(b.__qualname__ for b in value.__bases__)] = value
            for base in value.__mro__[1:]:
                if base.__qualname__.startswith(aggregate.__qualname__ + "."):
                    found[base.__qualname__ + "@" + ",".join(b.__qualname__ for b in base.__bases__)] = base
    return found

def outcome(call):
    try:
        return repr(call())
    except Exception as error:
        return type(error).__name__

def describe(cls):
    fields = dataclasses.fields(cls)
    values = {f.name: f"value {i}" for i, f in enumerate(fields)}
    values["originator_id"] = uuid.UUID(int=7)
    values["timestamp"] = datetime(2026, 1, 2, tzinfo=timezone.utc)
    event, same = cls(**values), cls(*values.values())
    other = cls(**{**values, fields[-1].name: "another"})
    return {
        "mro": [c.__qualname__ for c in cls.__mro__],
        "fields": [[f.name, str(f.type), "-" if f.default is dataclasses.MISSING else repr(f.default),
                    f.default_factory is dataclasses.MISSING, f.init, f.repr, f.hash, f.compare, f.kw_only] for f in fields],
        "params": repr(cls.__dataclass_params__), "signature": str(cls.__signature__),
        "inspect_signature": str(inspect.signature(cls)), "doc": cls.__doc__, "match_args": list(cls.__match_args__),
        "repr": repr(event), "eq": [event == same, event == other, event != same, event == values],
        "hash": outcome(lambda: hash(event) == hash(same)),
        "set": outcome(lambda: setattr(event, "timestamp", 1)), "set_other": outcome(lambda: setattr(event, "nope", 1)),
        "delete": outcome(lambda: delattr(event, "timestamp")),
        "missing": outcome(lambda: cls(originator_id=uuid.UUID(int=7))),
        "unexpected": outcome(lambda: cls(**values, nope=1)),
        "twice": outcome(lambda: cls(uuid.UUID(int=7), originator_id=uuid.UUID(int=7))),
        "too_many": outcome(lambda: cls(*values.values(), 1)),
        "bad_id": outcome(lambda: cls(**{**values, "originator_id": "not a uuid"})),
        "state": {k: repr(v) for k, v in vars(event).items()},
    }

described = {}
for aggregate in aggregates():
    for name, cls in events(aggregate).items():
        described[name] = describe(cls)
print(json.dumps({"fast": "__event_fields__" in vars(domain.turn.Turn.Event), "events": described}))
'''


def _describe(stock: bool) -> dict:
    flag = ["-X", "chronicle_stock_event_classes"] if stock else []
    done = subprocess.run([sys.executable, *flag, "-c", DESCRIBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    return _describe(stock=False), _describe(stock=True)


def test_every_event_class_is_made_as_the_stock_way_makes_it(both: tuple[dict, dict]) -> None:
    fast, stock = both
    assert fast["fast"] and not stock["fast"]
    assert len(fast["events"]) >= 120 and fast["events"].keys() == stock["events"].keys()
    for name, described in stock["events"].items():
        assert fast["events"][name] == described, name


def test_instances_of_the_fast_classes_behave_as_frozen_dataclasses(both: tuple[dict, dict]) -> None:
    """The comparison above is only as good as what it describes: these are the behaviours it covers."""
    fast, _ = both
    started = next(d for n, d in fast["events"].items() if n.startswith("Turn.Started@"))
    assert started["eq"] == [True, False, False, False]
    assert started["set"] == started["set_other"] == started["delete"] == "FrozenInstanceError"
    assert started["missing"] == started["unexpected"] == started["twice"] == started["too_many"] == "TypeError"
    assert started["bad_id"] == "TypeError"  # the base's __post_init__ still runs
    assert started["repr"].startswith("Turn.Started(originator_id=UUID('00000000-0000-0000-0000-000000000007')")
    assert started["doc"].startswith("Started(self, originator_id")  # stock shows the base's signature
