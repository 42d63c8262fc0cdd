"""MetricsExporter: a Prometheus scrape endpoint served by a small Trio HTTP handler.

Why not prometheus_client's own `start_http_server`: it answers from a thread of its
own, so the collectors would read the broker's dicts while the Trio thread changes them
(a "dictionary changed size during iteration" away from a failed scrape) and we would
need locks on the hot path to prevent it. Served from a Trio task instead, a scrape
runs between two requests of the event loop: the counters stay plain ints and dicts with
no lock, and producing the text (a few milliseconds for thousands of series, once every
scrape interval) is all the loop spends. The handler answers `GET /metrics` (and `/`)
with the text format and anything else with 404 or 405; a peer that sends a malformed or
oversized request, or nothing for REQUEST_TIMEOUT seconds, gets 400 or is closed.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("rmq.metrics")

METRICS_TYPES = ("DISABLE", "PROM")  # metricsExporterType values acted on (RocketMQ also has OTLP_GRPC, LOG)
REQUEST_TIMEOUT = 10.0  # seconds a client has to send its request head
MAX_HEAD = 8192  # bytes of request line and headers


class MetricsExporter:
    """Serves `registry` on host:port (port 0: a free one, see `port` once started).

    Use as `port = await nursery.start(exporter.serve)`.
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}/metrics"

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host or None)
        self.port = listeners[0].socket.getsockname()[1]
        log.info("metrics: Prometheus endpoint on %s", self.url)
        task_status.started(self.port)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                head = await _read_head(stream)
                if head is None:
                    return
                await stream.send_all(self._respond(head))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the scraper went away
        finally:
            await trio.aclose_forcefully(stream)

    def _respond(self, head: bytes) -> bytes:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response(400, "text/plain", b"bad request\n")
        method, target = parts[0], parts[1].split("?", 1)[0]
        if target not in ("/metrics", "/"):
            return _response(404, "text/plain", b"not found: try /metrics\n")
        if method not in ("GET", "HEAD"):
            return _response(405, "text/plain", b"method not allowed\n", allow="GET, HEAD")
        try:
            body = generate_latest(self.registry)
        except Exception:
            log.exception("metrics: a collector failed")
            return _response(500, "text/plain", b"collector failed\n")
        return _response(200, CONTENT_TYPE_LATEST, b"" if method == "HEAD" else body, length=len(body))


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request line and headers, or None (after answering 400 if too big)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            await stream.send_all(_response(431, "text/plain", b"request head too large\n"))
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        data += chunk
    return data


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 431: "Too Large", 500: "Error"}


def _response(status: int, content_type: str, body: bytes, *, length: int | None = None, **headers: Any) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body) if length is None else length}",
        "Connection: close",
        *(f"{name.title()}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
