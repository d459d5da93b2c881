"""The metaclass of the aggregates' `Event` bases: an `@event(Cls)` subclass reuses Cls's dataclass.

`@event(Cls)` makes eventsourcing define a subclass of `Cls` (and of `DecoratedFuncCaller`) with no
fields of its own, which its metaclass then turns into a frozen dataclass again: six functions
compiled from source per event class, ≈ 1 ms each event at import on this project's machines,
for methods equal to the ones `Cls` already has. Such a subclass is given `Cls`'s dataclass
fields here, which eventsourcing's dataclass processing takes as "already done" and skips; it
inherits `__init__`, `__repr__`, `__eq__` and `__hash__` (each reads the instance's class, so they
behave as generated ones would), and gets the frozen `__setattr__`/`__delattr__` and the
`__doc__` that processing would have given it. If a later eventsourcing processed it anyway,
the explicit `__setattr__` makes dataclasses raise TypeError at import: loud, never a silently
different event class. tests/unit/test_schema_versions.py compares such a class with a built one.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

from eventsourcing.domain import DecoratedFuncCaller, MetaDomainEvent


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


class EventType(MetaDomainEvent):
    def __new__(mcs, name: str, bases: tuple[type, ...], cls_dict: dict[str, Any]) -> Any:
        reuse = len(bases) == 2 and bases[0] is DecoratedFuncCaller and not cls_dict.get("__annotations__")
        if reuse:
            cls_dict = {**cls_dict, "__dataclass_fields__": bases[1].__dataclass_fields__,  # type: ignore[attr-defined]
                        "__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr}
        event_cls: Any = super().__new__(mcs, name, bases, cls_dict)  # type: ignore[arg-type]
        if reuse:  # as dataclasses writes it, from the signature eventsourcing sets (self included)
            event_cls.__doc__ = name + str(event_cls.__signature__).replace(" -> None", "")
        return event_cls
