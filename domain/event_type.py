"""The metaclass of the aggregates' `Event` bases: event classes made without compiling code.

eventsourcing makes every event class a frozen dataclass, and on Python 3.11 `dataclasses`
compiles six functions from source for each (`__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__`, `__delattr__`): ≈ 400 `exec` calls for this domain, two thirds of what importing
it cost, and every command that opens a store imports it. Here the same dataclass is made from
functions written once: the fields are found exactly as `dataclasses` finds them (its own
`_get_field`), and the methods read a per-class tuple of names where generated ones inline them.

An `@event(Cls)` subclass (bases `DecoratedFuncCaller, Cls`, no fields of its own) reuses `Cls`'s
fields and methods; it gets only the `__doc__` processing would have given it.

`python -X chronicle_stock_event_classes` makes every class the stock way instead: the oracle of
tests/unit/test_event_classes.py, which compares every event class and instance of both ways.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import MISSING, FrozenInstanceError
from typing import Any, Callable

from eventsourcing.domain import DecoratedFuncCaller, MetaDomainEvent

#: The stock way when asked for (the test's oracle), or on a Python whose `dataclasses` lacks the
#: helpers used here (checked on 3.11, 3.12 and 3.13: tests/unit/test_event_classes.py).
STOCK = "chronicle_stock_event_classes" in sys._xoptions or not all(
    hasattr(dataclasses, name) for name in ("_get_field", "_FIELD", "_HAS_DEFAULT_FACTORY")
)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _repr(self: Any) -> str:
    values = self.__dict__
    inner = ", ".join(f"{name}={values[name]!r}" for name in type(self).__event_fields__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = type(self).__event_fields__
    mine, theirs = self.__dict__, other.__dict__
    return tuple(mine[n] for n in names) == tuple(theirs[n] for n in names)


def _hash(self: Any) -> int:
    values = self.__dict__
    return hash(tuple(values[n] for n in type(self).__event_fields__))


def _init_for(qualname: str, names: tuple[str, ...], defaults: dict[str, Any], factories: dict[str, Callable[[], Any]],
              post_init: bool) -> Callable[..., None]:
    """An `__init__` taking the fields by position or name, as the generated one does."""
    count = len(names)
    qualname = f"{qualname}.__init__"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > count:
                raise TypeError(f"{qualname}() takes {count + 1} positional arguments but {len(args) + 1} were given")
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{qualname}() got multiple values for argument {name!r}")
                kwargs[name] = value
        values: dict[str, Any] = {}
        for name in names:
            if name in kwargs:
                values[name] = kwargs.pop(name)
            elif name in defaults:
                values[name] = defaults[name]
            elif name in factories:
                values[name] = factories[name]()
            else:
                raise TypeError(f"{qualname}() missing 1 required positional argument: {name!r}")
        if kwargs:
            raise TypeError(f"{qualname}() got an unexpected keyword argument {next(iter(kwargs))!r}")
        object.__setattr__(self, "__dict__", values)
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = qualname
    return __init__


def _make_dataclass(cls: Any) -> None:
    """Give `cls` what `dataclasses.dataclass(frozen=True)` would, without compiling anything."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        fields.update(getattr(base, "__dataclass_fields__", None) or {})
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        field = dataclasses._get_field(cls, name, annotation, False)  # type: ignore[attr-defined]
        if field._field_type is not dataclasses._FIELD or field.kw_only is True:  # type: ignore[attr-defined]
            raise TypeError(f"{cls.__qualname__}.{name}: an event field is a plain field (no ClassVar, InitVar, kw_only)")
        if isinstance(cls.__dict__.get(name), dataclasses.Field):
            raise TypeError(f"{cls.__qualname__}.{name}: give an event field a plain default, not field()")
        field.kw_only = False  # type: ignore[assignment]
        fields[name] = field
    names = tuple(fields)
    defaults = {n: f.default for n, f in fields.items() if f.default is not MISSING}
    factories = {n: f.default_factory for n, f in fields.items() if f.default_factory is not MISSING}
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, field in fields.items():
        default = defaults.get(name, dataclasses._HAS_DEFAULT_FACTORY if name in factories else inspect.Parameter.empty)  # type: ignore[attr-defined]
        parameters.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=field.type))
    signature = inspect.Signature(parameters, return_annotation=None)  # raises as dataclasses would on a bad order

    init = _init_for(cls.__qualname__, names, defaults, factories, hasattr(cls, "__post_init__"))
    init.__signature__ = signature  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = fields
    cls.__dataclass_params__ = cls.__dataclass_params__  # the frozen base's: init, repr, eq, frozen
    cls.__event_fields__ = names
    setattr(cls, "__match_args__", names)  # noqa: B010 - mypy refuses the attribute assignment
    cls.__init__ = init
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    cls.__hash__ = _hash
    cls.__setattr__ = _frozen_setattr
    cls.__delattr__ = _frozen_delattr
    if not cls.__doc__:  # as stock: `inspect.signature(cls)` there finds the base's `__signature__`, if any
        shown = getattr(cls, "__signature__", None) or signature.replace(parameters=parameters[1:])
        cls.__doc__ = cls.__name__ + str(shown).replace(" -> None", "")
    cls.__signature__ = signature


class EventType(MetaDomainEvent):
    def __new__(mcs, name: str, bases: tuple[type, ...], cls_dict: dict[str, Any]) -> Any:
        reuse = len(bases) == 2 and bases[0] is DecoratedFuncCaller and not cls_dict.get("__annotations__")
        if reuse:
            cls_dict = {**cls_dict, "__dataclass_fields__": bases[1].__dataclass_fields__,  # type: ignore[attr-defined]
                        "__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr}
        elif STOCK or not _plain(bases, cls_dict):
            return super().__new__(mcs, name, bases, cls_dict)  # type: ignore[arg-type]
        event_cls: Any = super(MetaDomainEvent, mcs).__new__(mcs, name, bases, cls_dict)  # type: ignore[misc]
        if reuse:  # as dataclasses writes it, from the signature eventsourcing sets (self included)
            event_cls.__signature__ = inspect.signature(event_cls.__init__)
            event_cls.__doc__ = name + str(event_cls.__signature__).replace(" -> None", "")
        else:
            _make_dataclass(event_cls)
        return event_cls


def _plain(bases: tuple[type, ...], cls_dict: dict[str, Any]) -> bool:
    """Made here only where the result is a frozen dataclass over frozen ones that defines none of
    the methods itself; anything else is left to eventsourcing and `dataclasses`."""
    own = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__slots__", "__dataclass_fields__")
    frozen = all(getattr(b, "__dataclass_params__", None) is None or b.__dataclass_params__.frozen for b in bases)  # type: ignore[attr-defined]
    return frozen and any(hasattr(b, "__dataclass_fields__") for b in bases) and not any(k in cls_dict for k in own)
