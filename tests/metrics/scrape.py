"""Scrape a Prometheus endpoint over a real socket and parse it with prometheus_client."""

from __future__ import annotations

import trio
from prometheus_client.parser import text_string_to_metric_families


async def http_get(port: int, request: bytes | None = None) -> tuple[int, bytes]:
    """(status, body) of one request to 127.0.0.1:port (default: GET /metrics)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request or b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name → [(labels, value)] (histograms give _bucket, _count and _sum samples)."""
    status, body = await http_get(port)
    assert status == 200, body
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    rows = [v for lab, v in samples.get(name, []) if all(lab.get(k) == want for k, want in labels.items())]
    assert rows, f"no sample {name} {labels}"
    return sum(rows)
