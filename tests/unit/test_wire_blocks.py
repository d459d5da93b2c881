"""domain/wire_blocks.py writes the block shapes out so that deciding "already wire form" needs no
pydantic; they must be what the content models say, so a field added to a model is never missed."""

from __future__ import annotations

from typing import Any

from chronicle.domain.content import BLOCK_MODELS
from chronicle.domain.wire_blocks import SHAPES, all_finite, plain_blocks


def _shapes_of_the_models() -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, type], ...]]]:
    plain: dict[Any, type] = {str: str, bool: bool}
    shapes = {}
    for kind, model in BLOCK_MODELS.items():
        checks = []
        for name, info in model.model_fields.items():
            if name == "type":
                continue
            annotation = info.annotation
            if annotation in plain:
                checks.append((name, plain[annotation]))
            elif getattr(annotation, "__origin__", None) is dict:
                checks.append((name, dict))
            else:
                break  # a field this check cannot vouch for: the type always takes the validated path
        else:
            shapes[kind] = (tuple(model.model_fields), tuple(checks))
    return shapes


def test_the_written_shapes_are_the_models():
    assert SHAPES == _shapes_of_the_models()


def test_non_finite_numbers_in_an_object_field_are_not_wire_form():
    assert all_finite({"a": [1.0, {"b": 2}]}) and not all_finite({"a": [1.0, {"b": float("nan")}]})
    assert plain_blocks([{"type": "tool_use", "id": "i", "name": "n", "input": {"x": 1.5}}])
    assert not plain_blocks([{"type": "tool_use", "id": "i", "name": "n", "input": {"x": float("inf")}}])
