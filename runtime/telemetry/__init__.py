"""OpenTelemetry GenAI traces derived from the event log (records -> derive -> export).

Only `derive` and `records` are needed to compute spans; OpenTelemetry itself (the `otel`
extra) is imported when spans are sent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import ChronicleStore

log = logging.getLogger("chronicle.telemetry")


def live_tracing(store: "ChronicleStore") -> Any:
    """The hook that traces each turn as it ends, when OTEL_* asks for tracing; None otherwise.

    A tracing setup that cannot work (the extra missing, an unknown exporter) is said once on
    stderr and the agent runs untraced: observability must not stop the work it observes.
    """
    from .export import TelemetrySetupError, trace_hook

    try:
        return trace_hook(store)
    except TelemetrySetupError as exc:
        log.warning("tracing off: %s", exc)
        return None
