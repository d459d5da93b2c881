"""`chronicle export-traces SESSION`: a session's OpenTelemetry trace, derived from its log.

The spans are the ones live tracing sends (the same derivation, the same ids), so an old
session, one traced with tracing off, or one that died and was resumed gets a complete trace.
"""

from __future__ import annotations

from typing import Annotated

import typer

from chronicle.runtime.telemetry.derive import derive_turn_spans
from chronicle.runtime.telemetry.records import session_logs

from .common import DbOption, JsonOption, err_console, fail, print_json, store_command


def export_traces(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    as_json: JsonOption = False,
    children: Annotated[
        bool, typer.Option("--children/--no-children", help="Include its sub-agents' sessions (default: yes)")
    ] = True,
    content: Annotated[
        bool, typer.Option("--content", help="Include message content (as CHRONICLE_OTEL_CAPTURE_CONTENT=1 does)")
    ] = False,
    db: DbOption = None,
) -> None:
    """Send a session's trace (invoke_agent, chat and execute_tool spans) to the OTLP endpoint, or print it.

    The spans are derived from the stored events, exactly as live tracing derives them. Where they go is configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER); with --json they are printed, one span per line, and nothing is sent.
    """
    from chronicle.runtime.telemetry.export import (
        ExporterSink,
        TelemetrySetupError,
        capture_content,
        exporter_from_env,
        tracing_requested,
    )

    with store_command(db, create=False) as store:
        root = store.session(store.resolve_session_id(session))
        spans = [
            span
            for log in session_logs(store, root, with_children=children)
            for span in derive_turn_spans(log, content or capture_content())
        ]
        if as_json:
            for span in spans:
                print_json(span.as_json())
            return
        if not tracing_requested():
            fail("nowhere to send the trace: set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER), or pass --json", 2)
        try:
            sink = ExporterSink(exporter_from_env())
        except TelemetrySetupError as exc:
            fail(str(exc), 2)
        try:
            sent = sink.export(spans)
        finally:
            sink.shutdown()
        if not sent:
            fail(f"{sink.endpoint} did not take the {len(spans)} span(s) of session {root.id} ({sink.failure}); "
                 "check OTEL_EXPORTER_OTLP_ENDPOINT")
        traces = len({s.trace_id for s in spans})
        err_console.print(f"exported {len(spans)} span(s) in {traces} trace(s) for session {root.id}")
