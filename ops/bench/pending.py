"""Sections whose feature is not in this checkout yet report that, never made-up numbers."""

from __future__ import annotations

import importlib.util

from common import Section


def missing(section: Section, module: str, what: str) -> Section | None:
    """A Section saying 'not available' if `module` cannot be imported, else None."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if found:
        return None
    return section.unavailable(f"{what} ({module}) is not on this branch yet; this section runs once it lands")
