"""Live spans that cannot be delivered cost one warning line and a bounded wait at exit, never the run.

The OTLP exporter retries a batch with backoff until its timeout (OTEL_EXPORTER_OTLP_TIMEOUT,
10 s), logging each retry and the give-up; and the batch processor's shutdown waits for that
export before the process may exit. Against an endpoint that does not answer, a one-second run
printed four SDK warnings and spent some eight seconds more at exit. Here the exporter's export
warnings are kept off stderr and said once, in our words, and the exit flush is given
SHUTDOWN_S — less when the endpoint has just failed: then the exporter is shut, which ends its
retries, and what was queued is dropped (the log keeps it; `export-traces` sends it later). An endpoint
that takes the connection and never answers logs no failure before the process leaves: the spans
still unsent at the deadline are then said once, with their count.

`export-traces` sends synchronously, and was left to the exporter: the same warnings, then the
exporter's whole timeout before it could exit 1. It now goes through `export_bounded`: the export
runs beside a wait of at most EXPORT_S that ends at the first failure, whose reason the command
says in its one error line.
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
#: Longest `export-traces` waits for the endpoint to take a session's spans.
EXPORT_S = 10.0
#: The loggers the OTLP/HTTP span exporter (and the client it logs through) and the batch processor use.
SDK_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk._shared_internal")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def _reason(record: logging.LogRecord) -> str:
    from ..redaction import redact_secrets

    text = redact_secrets(record.getMessage())  # the SDK's message may name the endpoint, password and all
    found = _ERRNO.search(text)
    if found:
        return found.group(1).strip().lower()
    code = re.search(r"batch code: (\d+), reason: (.*)", text)
    if code:
        return f"HTTP {code.group(1)} {code.group(2)}".strip()
    return "timed out" if "timeout" in text else text[:120]


def endpoint_of(exporter: Any) -> str:
    """The endpoint as it may be printed (a warning of run, serve or worker, export-traces' error): a password in
    it (`http://u:PASS@host/`) masked as every printed secret is (`u:***@`, runtime/redaction.py)."""
    from ..redaction import redact_secrets

    found = getattr(exporter, "_endpoint", None)
    if isinstance(found, str):
        return redact_secrets(found)
    return redact_secrets(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                          or "the OTLP endpoint")


class Delivery(logging.Filter):
    """Stands between the SDK's export logs and stderr: its retries, give-ups and shutdown notes are
    not printed; the first failure is said once, naming the endpoint and why."""

    def __init__(self, endpoint: str, announce: bool = True) -> None:
        super().__init__()
        self.endpoint = endpoint
        #: False when the caller says the failure itself (export-traces: its error line).
        self.announce = announce
        #: Why the first export failed, in a few words.
        self.reason: str | None = None
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
            if first:
                self.reason = _reason(record)
        self.failed.set()
        if first and self.announce:
            log.warning("tracing: %s did not take spans (%s); they are dropped, the run goes on "
                        "(`chronicle export-traces` can send them later)", self.endpoint, self.reason)
        return False

    def silent(self, waited_s: float, unsent: int) -> None:
        """The endpoint took the connection and never answered: said once, as a failure is."""
        with self._lock:
            first, self._said = not self._said, True
            if first:
                self.reason = f"no answer within {waited_s:g} s"
        if first and self.announce:
            log.warning("tracing: no answer from %s within %g s; %d span(s) dropped, the run went on "
                        "(`chronicle export-traces` can send them later)", self.endpoint, waited_s, unsent)

    def uninstall(self) -> None:
        for name in SDK_LOGGERS:
            logging.getLogger(name).removeFilter(self)


class Counting:
    """The exporter the batch processor is given: it counts the spans handed over and those the endpoint took,
    so the exit flush can say how many an endpoint that never answered cost (no failure is logged then: the
    export is still waiting when the process leaves)."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.handed = 0
        self.taken = 0
        self._lock = threading.Lock()

    def hand(self, count: int) -> None:
        with self._lock:
            self.handed += count

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.exporter.export(spans)
        if result == SpanExportResult.SUCCESS:
            with self._lock:
                self.taken += len(spans)
        return result

    @property
    def unsent(self) -> int:
        with self._lock:
            return self.handed - self.taken

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.exporter.force_flush(timeout_millis))


def bounded_shutdown(processor: Any, exporter: Any, delivery: Delivery | None, limit_s: float = SHUTDOWN_S,
                     counting: Counting | None = None) -> bool:
    """Flush and shut the batch processor within `limit_s`; at once once an export fails meanwhile.
    True if it finished in time (everything queued was handed over or given up by the exporter).
    Spans left unsent at the deadline with no failure said (an endpoint that took the connection and never
    answered) are said once too: otherwise they were dropped without a word."""
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
    if delivery is not None and delivery.reason is None and counting is not None and counting.unsent:
        delivery.silent(limit_s, counting.unsent)
    return False


def export_bounded(exporter: Any, spans: list[Any], delivery: Delivery, limit_s: float = EXPORT_S) -> str | None:
    """Export `spans` synchronously, waiting at most `limit_s` and no longer than the first failure
    (the exporter would retry it with backoff until its own timeout). None when the endpoint took
    them; else why not. On failure the exporter is shut, which ends its retries."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    outcome: list[Any] = []
    done = threading.Event()
    failures = delivery.failures

    def send() -> None:
        try:
            outcome.append(exporter.export(spans))
        except Exception as exc:  # noqa: BLE001 - said as the reason, never a traceback
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=send, name="chronicle-span-export", daemon=True).start()
    deadline = time.monotonic() + limit_s
    while not done.wait(0.02):
        if delivery.failures > failures or time.monotonic() >= deadline:
            break
    if done.is_set() and outcome and outcome[0] == SpanExportResult.SUCCESS:
        return None
    waiting = not done.is_set()
    if waiting:
        exporter.shutdown()  # ends the exporter's retry wait
        done.wait(0.5)
    if delivery.reason is not None:
        return delivery.reason
    if outcome and isinstance(outcome[0], Exception):
        return f"{type(outcome[0]).__name__}: {outcome[0]}"
    return f"no answer within {limit_s:g} s" if waiting else "the exporter reported a failure"
