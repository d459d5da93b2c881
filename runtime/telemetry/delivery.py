"""Live spans that cannot be delivered cost one warning line and a bounded wait at exit, never the run.

The OTLP exporter retries a batch with backoff until its timeout (OTEL_EXPORTER_OTLP_TIMEOUT,
10 s), logging each retry and the give-up; and the batch processor's shutdown waits for that
export before the process may exit. Against an endpoint that does not answer, a one-second run
printed four SDK warnings and spent some eight seconds more at exit. Here the exporter's export
warnings are kept off stderr and said once, in our words, and the exit flush is given
SHUTDOWN_S — less when the endpoint has just failed: then the exporter is shut, which ends its
retries, and what was queued is dropped (the log keeps it; `export-traces` sends it later).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any

log = logging.getLogger("chronicle.telemetry")

#: Longest the exit flush of the live spans may take.
SHUTDOWN_S = 2.0
#: The loggers the OTLP/HTTP span exporter (and the client it logs through) and the batch processor use.
SDK_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk._shared_internal")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def _reason(record: logging.LogRecord) -> str:
    text = record.getMessage()
    found = _ERRNO.search(text)
    if found:
        return found.group(1).strip().lower()
    code = re.search(r"batch code: (\d+), reason: (.*)", text)
    if code:
        return f"HTTP {code.group(1)} {code.group(2)}".strip()
    return "timed out" if "timeout" in text else text[:120]


def endpoint_of(exporter: Any) -> str:
    found = getattr(exporter, "_endpoint", None)
    if isinstance(found, str):
        return found
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "the OTLP endpoint"


class Delivery(logging.Filter):
    """Stands between the SDK's export logs and stderr: its retries, give-ups and shutdown notes are
    not printed; the first failure is said once, naming the endpoint and why."""

    def __init__(self, endpoint: str) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.failures = 0
        self.failed = threading.Event()
        self._said = False
        self._lock = threading.Lock()

    def install(self) -> "Delivery":
        for name in SDK_LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if "shutdown" in record.getMessage().lower():  # ours: shutting the exporter ends its retries
            return False
        with self._lock:
            self.failures += 1
            first, self._said = not self._said, True
        self.failed.set()
        if first:
            log.warning("tracing: %s did not take spans (%s); they are dropped, the run goes on "
                        "(`chronicle export-traces` can send them later)", self.endpoint, _reason(record))
        return False


def bounded_shutdown(processor: Any, exporter: Any, delivery: Delivery | None, limit_s: float = SHUTDOWN_S) -> bool:
    """Flush and shut the batch processor within `limit_s`; at once once an export fails meanwhile.
    True if it finished in time (everything queued was handed over or given up by the exporter)."""
    done = threading.Event()
    failures = delivery.failures if delivery is not None else 0

    def close() -> None:
        try:
            processor.shutdown()
        finally:
            done.set()

    threading.Thread(target=close, name="chronicle-span-flush", daemon=True).start()
    deadline = time.monotonic() + limit_s
    while not done.wait(0.02):
        if time.monotonic() >= deadline or (delivery is not None and delivery.failures > failures):
            break
    if done.is_set():
        return True
    exporter.shutdown()  # ends the exporter's retry wait; the processor's own shutdown then returns
    done.wait(0.5)
    return False
