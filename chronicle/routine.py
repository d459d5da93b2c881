"""`chronicle.Routine`: a routine defined in code, checked where the program writes it.

As `Agent(...)` is: a bad trigger, a cron expression that never fires, a missing prompt or a negative limit was
accepted here and refused only at `Chronicle.routines(...)`, far from the line that wrote it. The check is the one a
`[routines.NAME]` table gets (runtime/app/routines.py `checked`), so the words are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from chronicle.runtime.app.errors import DefinitionError
from chronicle.runtime.routines import Routine as Definition
from chronicle.runtime.routines import RoutineError


@dataclass(frozen=True)
class Routine(Definition):
    def __post_init__(self) -> None:
        from chronicle.runtime.app.routines import checked

        try:
            checked(self)  # builds the plain definition it checks against: no check of a check
        except RoutineError as exc:
            raise DefinitionError.of(exc) from None


__all__ = ["Routine"]
