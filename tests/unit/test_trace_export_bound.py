"""`export-traces`' synchronous export is bounded (runtime/telemetry/delivery.py): an endpoint that takes the
connection and never answers costs `limit_s`, not the exporter's timeout, and is said in a few words."""

from __future__ import annotations

import socket
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from chronicle.runtime.telemetry.delivery import Delivery, export_bounded


def test_an_endpoint_that_never_answers_costs_the_bound_not_the_exporters_timeout():
    with socket.socket() as silent:  # listens (the kernel completes the handshake) but never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = "http://127.0.0.1:%d/v1/traces" % silent.getsockname()[1]
        exporter = OTLPSpanExporter(endpoint=url, timeout=30)
        delivery = Delivery(url, announce=False).install()
        span = ReadableSpan(name="chat", context=SpanContext(1, 1, is_remote=False, trace_flags=TraceFlags(1)), start_time=1, end_time=2)
        try:
            started = time.monotonic()
            reason = export_bounded(exporter, [span], delivery, limit_s=0.5)
            took = time.monotonic() - started
        finally:
            exporter.shutdown()
            delivery.uninstall()
    assert reason == "no answer within 0.5 s" and took < 3, (reason, took)


def test_the_endpoint_a_warning_names_has_its_password_masked(caplog):
    """The live path's warning goes through whatever logging the process has (a library user's own handlers, not
    only the CLI's): the endpoint it names is masked at the source, as every printed URL is (`u:***@`)."""
    import logging

    from chronicle.runtime.telemetry.delivery import endpoint_of

    exporter = OTLPSpanExporter(endpoint="http://u:0tlpPassw0rd@127.0.0.1:9/v1/traces", timeout=1)
    delivery = Delivery(endpoint_of(exporter)).install()
    try:
        with caplog.at_level(logging.WARNING, logger="chronicle.telemetry"):
            record = logging.LogRecord("opentelemetry.sdk._shared_internal", logging.WARNING, __file__, 1,
                                       "Failed to export to http://u:0tlpPassw0rd@127.0.0.1:9/v1/traces: [Errno 111] Connection refused",
                                       None, None)
            delivery.filter(record)
    finally:
        exporter.shutdown()
        delivery.uninstall()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "http://u:***@127.0.0.1:9/v1/traces did not take spans (connection refused)" in said
    assert "0tlpPassw0rd" not in said
