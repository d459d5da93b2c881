"""The stored vocabulary: one pydantic union, discriminated by topic, of every event Chronicle writes.

Each member is built from an event class's own fields and the shapes it declares
(domain/payloads.py), so a field added to an event is in the vocabulary without being written
twice. A stored event fits when, decoded and upcast as the code of today reads it, every field
has its declared type (strictly: no "5" for 5, no string for a UUID) and no field is missing or
unknown. That is the check that rebuilding sessions after a schema change rests on: an event
that does not fit is one some reader will misread, found by `chronicle doctor` before a reader
trips over it, and named by its position.

Nothing here runs when events are decoded or written; the union is built the first time a
check asks (≈ 0.1 s for about a hundred classes), once per process.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cached_property, lru_cache
from typing import Any, Iterable, Literal, NotRequired, Union

from eventsourcing.utils import get_topic

#: Each event's own member: no field it does not declare, no type coerced.
_FIELD_CONFIG = {"extra": "forbid", "strict": True}


@dataclasses.dataclass(frozen=True)
class Misfit:
    """Why one stored event does not fit the vocabulary: its topic and pydantic's first complaint."""

    topic: str
    #: The field and what is wrong with it, the same for every event with this misfit.
    problem: str
    #: What the field held, when it held something.
    got: str = ""

    @property
    def detail(self) -> str:
        return f"{self.problem} (got {self.got})" if self.got else self.problem


class Vocabulary:
    """The union over `classes` (event classes, snapshots left out by the caller)."""

    def __init__(self, classes: Iterable[type]) -> None:
        self.classes = {get_topic(cls): cls for cls in classes}

    @cached_property
    def _adapter(self) -> Any:
        from pydantic import Discriminator, TypeAdapter

        members = [_member(topic, cls) for topic, cls in sorted(self.classes.items())]
        union: Any = typing.Annotated[Union[tuple(members)], Discriminator("topic")]  # noqa: UP007 - built from a tuple
        return TypeAdapter(union)

    def check(self, topic: str, event: Any) -> Misfit | None:
        """None if `event` (decoded and upcast) fits its class's declared fields, else why not."""
        if topic not in self.classes:
            return Misfit(topic, "no event class of this topic is in the vocabulary")
        from pydantic import ValidationError

        values = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
        try:
            self._adapter.validate_python({"topic": topic, **values})
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"][1:]) or "(event)"  # loc[0] is the union member
            got = "" if first["type"] == "missing" else _short(first.get("input"))
            return Misfit(topic, f"{where}: {first['msg']}", got)
        return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _member(topic: str, cls: type) -> Any:
    """A TypedDict of the event's dataclass fields, plus `topic` as the discriminator."""
    import typing_extensions

    hints = typing.get_type_hints(cls, localns=_payload_names(), include_extras=True)
    fields: dict[str, Any] = {"topic": Literal[topic]}
    for field in dataclasses.fields(cls):
        fields[field.name] = _for_pydantic(hints[field.name])
    make: Any = typing_extensions.TypedDict  # called, not subclassed: the fields are only known here
    member = make(cls.__qualname__.replace(".", "_"), fields)
    member.__pydantic_config__ = _FIELD_CONFIG
    return member


@lru_cache(maxsize=1)
def _payload_names() -> dict[str, Any]:
    """The shapes the event classes' annotations name: the domain imports them for the type checker
    only (≈ 3 ms of every command's start-up otherwise), so they are handed to `get_type_hints` here;
    names of the event's own module come after them."""
    from chronicle.domain import payloads

    return {k: v for k, v in vars(payloads).items() if not k.startswith("_")}


def _for_pydantic(tp: Any) -> Any:
    """`tp` with each `typing.TypedDict` in it swapped for an equal typing_extensions one (pydantic
    needs those before Python 3.12; the domain does not import typing_extensions, to start fast)."""
    if typing.is_typeddict(tp):
        return _typed_dict(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None or not args:
        return tp
    converted = tuple(_for_pydantic(a) for a in args)
    if origin is Union or origin is types.UnionType:
        return Union[converted]  # noqa: UP007 - built from a tuple
    if origin is NotRequired:
        return NotRequired[converted[0]]
    if origin is Literal or origin is typing.Annotated:
        return tp
    return origin[converted]


@lru_cache(maxsize=None)
def _typed_dict(td: type) -> Any:
    import typing_extensions

    hints = typing.get_type_hints(td, include_extras=True)
    fields = {}
    for name, tp in hints.items():
        tp = _for_pydantic(tp)
        if name not in td.__required_keys__ and typing.get_origin(tp) is not NotRequired:  # type: ignore[attr-defined]
            tp = NotRequired[tp]
        fields[name] = tp
    make: Any = typing_extensions.TypedDict
    clone = make(td.__name__, fields)
    clone.__pydantic_config__ = {**getattr(td, "__pydantic_config__", {}), "strict": True}
    return clone
