"""Tracing as an operator turns it on: OTEL_EXPORTER_OTLP_ENDPOINT, a real `chronicle run`, OTLP over
HTTP/protobuf to a loopback collector written here; then `chronicle export-traces` sends the same spans."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


class Collector:
    """Accepts OTLP/HTTP protobuf trace exports on 127.0.0.1 and keeps every span it was sent."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                collector.paths.append(self.path)
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            collector.spans.append(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex() or None,
                                    "resource": resource,
                                    "attributes": {a.key: _value(a.value) for a in span.attributes},
                                }
                            )
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def collector():
    server = Collector()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_a_run_sends_its_spans_over_otlp_http_and_export_traces_sends_the_same_ones(db_url, workspace, tmp_path, collector):
    script = write_script(
        tmp_path / "s.json", [response(tool_use("r1", "read_file", path="hello.txt")), response(text("it says hello"))]
    )
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_SERVICE_NAME": "chronicle-test"}
    run = cli("run", "read it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url, env=env)
    assert run.returncode == 0, run.stderr
    session_id = json_lines(run.stdout)[0]["session_id"]
    assert collector.paths and set(collector.paths) == {"/v1/traces"}
    live = {s["span_id"]: s for s in collector.spans}
    names = sorted(s["name"] for s in live.values())
    assert names == ["chat scripted", "chat scripted", "execute_tool read_file", "invoke_agent main"]
    agent = next(s for s in live.values() if s["name"] == "invoke_agent main")
    assert agent["parent"] is None and agent["resource"]["service.name"] == "chronicle-test"
    assert agent["attributes"]["gen_ai.conversation.id"] == session_id
    assert all(s["parent"] == agent["span_id"] for s in live.values() if s is not agent)
    assert len({s["trace_id"] for s in live.values()}) == 1

    collector.spans.clear()
    exported = cli("export-traces", session_id[:8], db=db_url, env=env)
    assert exported.returncode == 0, exported.stderr
    assert "exported 4 span(s) in 1 trace(s)" in exported.stderr
    again = {s["span_id"]: s for s in collector.spans}
    assert again.keys() == live.keys()
    assert all(again[k]["attributes"] == live[k]["attributes"] and again[k]["parent"] == live[k]["parent"] for k in live)

    printed = json_lines(cli("export-traces", session_id, "--json", db=db_url).stdout)
    assert {p["span_id"] for p in printed} == live.keys()
    nowhere = cli("export-traces", session_id, db=db_url)
    assert nowhere.returncode == 2 and "OTEL_EXPORTER_OTLP_ENDPOINT" in nowhere.stderr


def test_a_protocol_other_than_http_protobuf_is_said_once_not_silently_ignored(sqlite_url, workspace, tmp_path, collector):
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url, env=env)
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "warning" in line.lower()]
    assert len(said) == 1 and "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported; spans are sent over OTLP HTTP/protobuf" in said[0], (
        ran.stderr)
    assert collector.spans, "the spans still went, over HTTP"
    plain = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url,
                env={**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert plain.returncode == 0 and "warning" not in plain.stderr.lower(), plain.stderr


def test_console_spans_go_to_stderr_so_run_json_stays_one_json_object_per_line(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url,
              env={"OTEL_TRACES_EXPORTER": "console"})
    assert ran.returncode == 0, ran.stderr
    events = json_lines(ran.stdout)  # every line parses
    assert events[-1]["type"] == "agent_end"
    assert "invoke_agent" in ran.stderr, "the spans are printed, on stderr"


def test_an_unreachable_endpoint_costs_one_warning_and_the_spans_not_the_run(sqlite_url, workspace, tmp_path):
    """Nothing listens at the endpoint: the run answers and exits 0 at once, stderr has one line about
    tracing (not the exporter's retries and give-up), and the spans stay derivable from the log."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    # With a 30 s export timeout the exporter retries for some 15 s; the exit must not wait for that.
    # The endpoint's password is never printed: masked as export-traces' error line masks it.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://u:0tlpPassw0rd@127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_TIMEOUT": "30"}
    started = time.monotonic()
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url, env=env)
    took = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr
    assert json_lines(ran.stdout)[-1]["type"] == "agent_end"
    said = [line for line in ran.stderr.splitlines() if "warning" in line.lower() or "error" in line.lower()]
    assert len(said) == 1, ran.stderr
    assert f"http://u:***@127.0.0.1:{port}" in said[0] and "connection refused" in said[0] and "dropped" in said[0]
    assert "0tlpPassw0rd" not in ran.stderr
    assert took < 10, f"exit waited {took:.1f} s for an endpoint that refuses connections"
    session_id = json_lines(ran.stdout)[0]["session_id"]
    printed = json_lines(cli("export-traces", session_id, "--json", db=sqlite_url).stdout)
    assert [p["name"] for p in printed] == ["invoke_agent main", "chat scripted"]


def test_an_endpoint_that_never_answers_costs_one_warning_with_the_spans_it_dropped(sqlite_url, workspace, tmp_path):
    """The collector takes the connection and never answers: no export fails before the exit flush's 2 s are up,
    so the SDK logs nothing, and the spans were dropped without a word. Now one line says so, with their count."""
    import socket
    import time

    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    with socket.socket() as silent:  # listens (the kernel completes the handshake) but never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}", "OTEL_EXPORTER_OTLP_TIMEOUT": "30"}
        started = time.monotonic()
        ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url, env=env)
        took = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "warning" in line.lower() or "error" in line.lower()]
    assert len(said) == 1, ran.stderr
    assert f"no answer from {env['OTEL_EXPORTER_OTLP_ENDPOINT']}/v1/traces within 2 s; 2 span(s) dropped" in said[0], said[0]
    assert took < 10, f"exit waited {took:.1f} s for an endpoint that never answers"


def test_export_traces_to_an_unreachable_endpoint_is_one_line_and_exit_1_without_waiting_for_the_retries(sqlite_url, workspace, tmp_path):
    """The synchronous export path: not the exporter's retry warnings and its whole timeout, but one error
    line naming the endpoint and why, at the first failure."""
    import socket
    import time

    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    session_id = json_lines(ran.stdout)[0]["session_id"]
    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # With a 30 s export timeout the exporter retries for some 15 s before it gives up.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_TIMEOUT": "30"}
    started = time.monotonic()
    exported = cli("export-traces", session_id, db=sqlite_url, env=env)
    took = time.monotonic() - started
    assert exported.returncode == 1, exported.stderr
    lines = exported.stderr.strip().splitlines()
    assert len(lines) == 1, exported.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "connection refused" in lines[0] and "2 span(s)" in lines[0], lines[0]
    assert took < 5, f"export-traces waited {took:.1f} s for an endpoint that refuses connections"
