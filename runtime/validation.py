"""One line for a configuration value pydantic refused: the setting's name, what it must be, what it was.

Shared by the environment model (runtime/environment.py) and chronicle.toml / flags (runtime/settings.py),
so every configuration error reads the same way.
"""

from __future__ import annotations

from pydantic import ValidationError

EXPECTED = {
    "float_type": "a number", "float_parsing": "a number", "int_type": "a whole number", "int_parsing": "a whole number",
    "int_from_float": "a whole number", "bool_type": "true or false", "finite_number": "a finite number",
    "greater_than_equal": "a number ≥ {ge}", "greater_than": "a number > {gt}", "less_than_equal": "a number ≤ {le}",
    "extra_forbidden": "no such key",
}


def explain(exc: ValidationError, where: str, names: dict[str, str] | None = None, allowed: list[str] | None = None) -> str:
    """One line for the first problem: the setting, what it must be, what it was."""
    first = exc.errors()[0]
    if first["type"] == "value_error":  # a check that words its own message (runtime/providers/env_settings.py)
        return str((first.get("ctx") or {}).get("error") or first["msg"].removeprefix("Value error, "))
    key = ".".join(str(p) for p in first["loc"])
    template = EXPECTED.get(first["type"])
    if template:
        expected = template.format(**(first.get("ctx") or {}))
    elif first["type"] == "literal_error":  # pydantic's "Input should be 'a' or 'b'": what it must be, as one of
        expected = "one of " + str((first.get("ctx") or {}).get("expected", first["msg"]))
    else:
        expected = first["msg"][0].lower() + first["msg"][1:] if first["msg"] else "another value"
    got = first.get("input")
    setting = (names or {}).get(key) or f"{where}{key}"
    if first["type"] == "extra_forbidden":
        return f"{setting}: unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    return f"{setting}: expected {expected}, got {got!r}"
