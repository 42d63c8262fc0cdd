"""`rmq dev --metrics`: the name server, the broker and the gRPC proxy serve Prometheus metrics, at
the URLs it prints."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.metrics.scrape import scrape, value

from ..ports import free_ports

ROOT = Path(__file__).resolve().parents[2]


async def test_dev_with_metrics_serves_every_endpoint(tmp_path: Path) -> None:
    broker_port = free_ports(2, below=2)
    ns_port = free_ports()
    with open(tmp_path / "dev.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "dev", "--store", str(tmp_path / "store"), "--namesrv-port", str(ns_port),
             "--broker-port", str(broker_port), "--metrics", "--metrics-port", "0", "--proxy-port", "0",
             "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        )  # fmt: skip
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while not any(line.startswith("export NAMESRV_ADDR") for line in seen):
            try:  # bounded even if the process hangs without a word
                seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                pytest.fail(f"rmq dev --metrics did not start in 30 s: {seen}")
        urls = dict(
            re.findall(
                r"^(name server|broker broker-a|proxy) metrics: http://127\.0\.0\.1:(\d+)/metrics$", "".join(seen), re.M
            )
        )
        assert set(urls) == {"name server", "broker broker-a", "proxy"}, seen
        broker = await scrape(int(urls["broker broker-a"]))
        assert value(broker, "rocketmq_broker_permission", node_type="broker", node_id="broker-a") == 6
        assert value(broker, "rocketmq_storage_size") >= 0
        namesrv = await scrape(int(urls["name server"]))
        assert value(namesrv, "rocketmq_broker_number", node_type="nameserver") == 1  # the broker registered
        proxy = await scrape(int(urls["proxy"]))
        assert value(proxy, "rocketmq_proxy_up", node_type="proxy", proxy_mode="cluster") == 1
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
