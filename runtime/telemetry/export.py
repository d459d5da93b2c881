"""Derived spans out to OpenTelemetry: the SDK's span objects, the exporter the OTEL_* variables name,
and the live hook that traces each turn as it ends.

Spans are not opened and closed around the work as it happens: each finished turn is read back
from the log and derived (derive.py), then handed to the exporter as finished SDK spans with
the derived ids and times. A turn that waits for approval or dies with its process is traced
when it finally ends, by whichever process ends it, complete — and `chronicle export-traces`
sends exactly the same spans for any session in the store.

Tracing is on when OTEL_TRACES_EXPORTER (other than `none`) or OTEL_EXPORTER_OTLP_ENDPOINT /
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. `otlp` (the default) is OTLP over HTTP/protobuf,
configured by the SDK's own variables (OTEL_EXPORTER_OTLP_PROTOCOL other than http/protobuf is warned
about, once: it is not honoured); `console` prints spans. Message content is recorded only
with CHRONICLE_OTEL_CAPTURE_CONTENT=1. Needs the `otel` extra.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Sequence
from uuid import UUID

from ..hooks import Hook
from ..live import TurnEnd
from .delivery import Counting, Delivery, bounded_shutdown, endpoint_of, export_bounded
from .derive import SpanRecord, derive_turn_spans
from .records import turn_log

if TYPE_CHECKING:
    from ..store import ChronicleStore

log = logging.getLogger("chronicle.telemetry")
SCOPE = "chronicle"
FINISHED = frozenset({"completed", "failed", "cancelled", "stopped"})


class TelemetrySetupError(RuntimeError):
    """Tracing was asked for but cannot work (the extra is missing, an unknown exporter)."""


def tracing_requested(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    exporter = (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def capture_content() -> bool:
    return os.environ.get("CHRONICLE_OTEL_CAPTURE_CONTENT", "").strip() == "1"


class SpanSink(Protocol):
    def export(self, spans: Sequence[SpanRecord]) -> object: ...

    def shutdown(self) -> None: ...


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000_000)


def to_sdk_spans(records: Sequence[SpanRecord], resource: Any = None) -> list[Any]:
    """Finished SDK spans (ReadableSpan) carrying the derived ids, times, attributes and events."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    resource = resource or default_resource()
    scope = InstrumentationScope(SCOPE)
    flags = TraceFlags(TraceFlags.SAMPLED)
    spans = []
    for record in records:
        context = SpanContext(record.trace_id, record.span_id, is_remote=False, trace_flags=flags)
        parent = (
            SpanContext(record.trace_id, record.parent_span_id, is_remote=False, trace_flags=flags)
            if record.parent_span_id is not None
            else None
        )
        status = Status(StatusCode.ERROR, record.error) if record.error is not None else Status(StatusCode.UNSET)
        spans.append(
            ReadableSpan(
                name=record.name,
                context=context,
                parent=parent,
                resource=resource,
                attributes=dict(record.attributes),
                events=[Event(e.name, dict(e.attributes), timestamp=_ns(e.at)) for e in record.events],
                kind=SpanKind.CLIENT if record.kind == "client" else SpanKind.INTERNAL,
                status=status,
                start_time=_ns(record.start),
                end_time=_ns(record.end),
                instrumentation_scope=scope,
            )
        )
    return spans


def default_resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; "chronicle" is only the fallback name.
    return Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "chronicle"})


class ExporterSink:
    """Hands derived spans to an SDK exporter; `batch` sends them from a background thread so a
    slow collector never holds up the agent (the live path), otherwise synchronously (export-traces)."""

    def __init__(self, exporter: Any, batch: bool = False) -> None:
        self.exporter = exporter
        self.processor: Any = None
        self.delivery: Delivery | None = None
        self.counting: Counting | None = None
        if batch:
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            self.counting = Counting(exporter)  # what an endpoint that never answers cost, said at exit
            counted: Any = self.counting  # a SpanExporter by its methods (delivery.py imports no OpenTelemetry)
            self.processor = BatchSpanProcessor(counted)
            # the live path: an endpoint that does not answer is one warning, and a bounded wait at exit
            self.delivery = Delivery(endpoint_of(exporter)).install()
        else:
            # export-traces: the SDK's retry warnings kept off stderr; the command says the failure, once
            self.delivery = Delivery(endpoint_of(exporter), announce=False).install()
        #: Why the last synchronous export failed (None: it did not).
        self.failure: str | None = None

    @property
    def endpoint(self) -> str:
        return self.delivery.endpoint if self.delivery is not None else endpoint_of(self.exporter)

    def export(self, spans: Sequence[SpanRecord]) -> bool:
        """False when a synchronous export failed, within EXPORT_S (`failure` says why); the batching
        path reports through the SDK's log."""
        sdk_spans = to_sdk_spans(spans)
        if self.processor is not None:
            assert self.counting is not None
            self.counting.hand(len(sdk_spans))
            for span in sdk_spans:
                self.processor.on_end(span)
        elif sdk_spans:
            assert self.delivery is not None
            self.failure = export_bounded(self.exporter, sdk_spans, self.delivery)
            return self.failure is None
        return True

    def shutdown(self) -> None:
        if self.processor is not None:
            # flushes what is queued, within SHUTDOWN_S
            bounded_shutdown(self.processor, self.exporter, self.delivery, counting=self.counting)
        else:
            self.exporter.shutdown()
            if self.delivery is not None:
                self.delivery.uninstall()


def exporter_from_env() -> Any:
    """The exporter OTEL_TRACES_EXPORTER names (default otlp: HTTP/protobuf to OTEL_EXPORTER_OTLP_*)."""
    name = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    try:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            _say_protocol()
            return OTLPSpanExporter()
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            # stderr: stdout carries a command's own output, one JSON object per line with --json
            return ConsoleSpanExporter(out=sys.stderr)
    except ImportError:
        raise TelemetrySetupError(
            "tracing is configured (OTEL_* variables) but OpenTelemetry is not installed: pip install 'chronicle-agent[otel]'"
        ) from None
    raise TelemetrySetupError(f"OTEL_TRACES_EXPORTER={name!r} is not supported: use otlp, console or none")


#: The OTLP protocols the exporter speaks: the SDK's HTTP exporter sends protobuf whatever the variable says.
PROTOCOLS = ("", "http/protobuf")
_protocol_said = False


def _say_protocol() -> None:
    """OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=grpc (or http/json) is not honoured: spans still go over HTTP/protobuf,
    which a gRPC collector's port refuses. Said once per process, rather than leaving the variable silently unread."""
    global _protocol_said
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = (os.environ.get(variable) or "").strip().lower()
        if value:
            break
    if value in PROTOCOLS or _protocol_said:
        return
    _protocol_said = True
    log.warning("tracing: %s=%s is not supported; spans are sent over OTLP HTTP/protobuf (the only protocol Chronicle "
                "speaks: point the endpoint at the collector's HTTP port, 4318 by default)", variable, value)


_live_sink: SpanSink | None = None


def live_sink() -> SpanSink:
    """One batching sink per process, flushed at exit (atexit runs after SIGTERM's SystemExit too)."""
    global _live_sink
    if _live_sink is None:
        _live_sink = ExporterSink(exporter_from_env(), batch=True)
        atexit.register(_live_sink.shutdown)
    return _live_sink


class TraceHook(Hook):
    """Traces each turn when it ends, from what the log holds: the same derivation as export-traces."""

    def __init__(self, store: "ChronicleStore", sink: SpanSink, capture: bool | None = None) -> None:
        self.store = store
        self.sink = sink
        self.capture = capture_content() if capture is None else capture

    async def on_event(self, event: Any) -> None:
        if not isinstance(event, TurnEnd) or event.status not in FINISHED:
            return
        try:
            turn = self.store.turn(UUID(event.turn_id))
            if turn.finished:
                self.sink.export(derive_turn_spans(turn_log(self.store, turn), self.capture))
        except Exception as exc:  # noqa: BLE001 - tracing must never fail a turn; the log keeps everything
            log.warning("could not trace turn %s: %s", event.turn_id, exc)


def trace_hook(store: "ChronicleStore") -> TraceHook | None:
    """The live tracing hook when the environment asks for tracing; None otherwise."""
    if not tracing_requested():
        return None
    return TraceHook(store, live_sink())
