"""An OTLP trace receiver on loopback, for the gateway's tracing tests.

It stands in for the OpenTelemetry Collector, whose binary installs from none of the package registries these
tests may use: a real HTTP server (``POST /v1/traces``, OTLP/HTTP with protobuf bodies, gzip or not) or a real
gRPC server (``opentelemetry.proto.collector.trace.v1.TraceService/Export``), each decoding the requests with
the ``opentelemetry-proto`` messages the Collector itself is generated from, and answering as the Collector
does. The spans it received are kept, flattened to `ReceivedSpan`.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["GrpcReceiver", "OtlpReceiver", "ReceivedSpan"]

_KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass
class ReceivedSpan:
    """One span as the receiver decoded it (ids in hex, attributes as Python values)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict[str, Any]
    error: bool
    service: str
    start_ns: int
    end_ns: int
    events: list[str] = field(default_factory=list)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return None if which is None else getattr(value, which)


def _spans(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    out = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(ReceivedSpan(
                    span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                    _KINDS.get(span.kind, str(span.kind)), {a.key: _value(a.value) for a in span.attributes},
                    span.status.code == 2, str(resource.get("service.name", "")), span.start_time_unix_nano,
                    span.end_time_unix_nano, [e.name for e in span.events]))
    return out


class _Store:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.lock = threading.Lock()

    def take(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        spans = _spans(request)
        with self.lock:
            self.requests += 1
            self.spans.extend(spans)

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 20) -> list[ReceivedSpan]:
        """The spans received, once ``predicate`` holds for them (AssertionError with what came, after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans) or time.monotonic() > deadline:
                assert predicate(spans), [(s.name, s.kind, s.attributes) for s in spans]
                return spans
            time.sleep(0.05)


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(404 if self.path != "/v1/traces" else 415)
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.store.take(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
        self.server.store.headers.append(dict(self.headers.items()))
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    store: _HttpStore


class _HttpStore(_Store):
    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []


class OtlpReceiver(_HttpStore):
    """OTLP/HTTP (protobuf) on a loopback port: ``endpoint`` is its base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        super().__init__()
        self.httpd = _HttpServer(("127.0.0.1", 0), _Handler)
        self.httpd.store = self
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class GrpcReceiver(_Store):
    """OTLP/gRPC on a loopback port: ``endpoint`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        super().__init__()
        from concurrent import futures

        import grpc  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        store = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,
                       context: Any) -> trace_service_pb2.ExportTraceServiceResponse:
                store.take(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"

    def __enter__(self) -> GrpcReceiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=None)
