"""Chronicle's domain: aggregates, their events and lifecycles, and the values they carry.

Pure by rule: standard library, pydantic, ``eventsourcing.domain`` and ``transitions`` only.
No clock is read and no id is invented here; both are handed in by the runtime.
"""

from . import schema as _schema  # noqa: E402,F401 - declares every event's class_version on import
