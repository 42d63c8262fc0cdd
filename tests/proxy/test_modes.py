"""The proxy where RocketMQ runs it: `rmq dev` serves it beside its broker, and
`mqbroker --enable-proxy` (local mode) inside the broker's process. The official 5.x client
sends and receives through each."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from rmq.namesrv import NamesrvConfig, NamesrvServer
from tests.client.conftest import Cluster, create_topic
from tests.metrics.scrape import scrape, value

from ..ports import free_ports
from .conftest import run_client

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "ModeTopic"
GROUP = "ModeGroup"


@contextmanager
def started(args: list[str], log: Path) -> Iterator[subprocess.Popen[str]]:
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()


async def wait_for_line(proc: subprocess.Popen[str], prefix: str, log: Path) -> list[str]:
    """stdout lines up to the one starting with `prefix` (read in a thread: bounded)."""
    seen: list[str] = []
    with trio.move_on_after(30):
        while True:
            line = await trio.to_thread.run_sync(proc.stdout.readline)  # type: ignore[union-attr]
            if not line:
                break
            seen.append(line)
            if line.startswith(prefix):
                return seen
    raise AssertionError(f"no {prefix!r} line: {seen}\n{log.read_text()[-3000:]}")


async def send_and_receive(endpoint: str) -> None:
    sent = await run_client(endpoint, "send", TOPIC, GROUP, "3")
    got = await run_client(endpoint, "receive", TOPIC, GROUP, "3")
    assert got[-1] == {"received": 3}
    assert sorted(m["id"] for m in got[:-1]) == sorted(s["sent"] for s in sent)


async def test_rmq_dev_serves_the_proxy(tmp_path: Path) -> None:
    ns_port = free_ports()
    broker_port = free_ports(3, below=2)  # the broker listens on listenPort-2, listenPort and +1
    proxy_port = broker_port + 2
    args = ["dev", "--store", str(tmp_path / "store"), "--namesrv-port", str(ns_port)]
    args += ["--broker-port", str(broker_port), "--proxy-port", str(proxy_port), "--log-level", "WARNING"]
    with started(args, tmp_path / "dev.log") as proc:
        seen = await wait_for_line(proc, "export NAMESRV_ADDR", tmp_path / "dev.log")
        assert any(f"endpoints 127.0.0.1:{proxy_port}" in line for line in seen), seen
        await create_topic(f"127.0.0.1:{broker_port}", f"127.0.0.1:{ns_port}", TOPIC)
        await send_and_receive(f"127.0.0.1:{proxy_port}")


async def test_mqbroker_enable_proxy(tmp_path: Path) -> None:
    broker_port = free_ports(3, below=2)
    proxy_port = broker_port + 2
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nlistenPort={broker_port}\nbrokerIP1=127.0.0.1\nstorePathRootDir={store}\n")
    proxy_conf = tmp_path / "rmq-proxy.json"
    metrics_port = free_ports()  # the proxy's own endpoint (the broker serves none here)
    settings = {
        "grpcClientConsumerMinLongPollingTimeoutMillis": 500,
        "minInvisibleTimeMillsForRecv": 1000,
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": metrics_port,
    }
    proxy_conf.write_text(json.dumps(settings))
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        args = ["broker", "-c", str(conf), "-n", ns.address, "--enable-proxy", "-pc", str(proxy_conf)]
        args += ["--proxy-port", str(proxy_port), "--log-level", "WARNING"]
        with started(args, tmp_path / "broker.log") as proc:
            await wait_for_line(proc, "The store path", tmp_path / "broker.log")
            await create_topic(f"127.0.0.1:{broker_port}", ns.address, TOPIC)
            await send_and_receive(f"127.0.0.1:{proxy_port}")
            m = await scrape(metrics_port)  # mqbroker --enable-proxy installed the proxy's exporter
            assert value(m, "rocketmq_rpc_latency_count", request_code="SendMessage", proxy_mode="local") == 3


async def test_rmq_proxy_process(tmp_path: Path, cluster: Cluster) -> None:
    """`rmq proxy -n NAMESRV` (cluster mode) as its own process."""
    await cluster.create_topic(TOPIC)
    port, metrics_port = free_ports(), free_ports()
    proxy_conf = tmp_path / "rmq-proxy.json"
    proxy_conf.write_text(f'{{"metricsExporterType": "PROM", "metricsPromExporterPort": {metrics_port}}}')
    args = ["proxy", "-n", cluster.namesrv_addr, "--port", str(port), "--host", "127.0.0.1", "--log-level", "WARNING"]
    with started([*args, "-pc", str(proxy_conf)], tmp_path / "proxy.log") as proc:
        await wait_for_line(proc, "rmq proxy boot success", tmp_path / "proxy.log")
        [route] = await run_client(f"127.0.0.1:{port}", "query_route", TOPIC, GROUP)
        assert route == {"code": 20000, "message": "OK", "queues": 4}
        m = await scrape(metrics_port)  # `rmq proxy` installed the proxy's exporter
        assert value(m, "rocketmq_rpc_latency_count", request_code="QueryRoute", proxy_mode="cluster") == 1
