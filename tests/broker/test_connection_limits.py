"""A broker's connection limits (serverMaxConnections, serverMaxConnectionsPerAddress) and
their metrics, over real sockets."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingError
from tests.metrics.scrape import scrape, value

from .cluster import loopback_namesrv, start_broker


async def test_the_main_port_refuses_past_its_limit_and_counts_it(tmp_path: Path) -> None:
    props = {
        "serverMaxConnections": "2",
        "vipChannelEnable": "false",
        "metricsExporterType": "PROM",
        "metricsPromExporterPort": "0",
    }
    async with loopback_namesrv() as namesrv, trio.open_nursery() as nursery:
        broker = await start_broker(nursery, tmp_path / "store", namesrv, **props)
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        async with RemotingClient() as a, RemotingClient() as b:
            for client in (a, b):
                assert (await client.invoke(broker.address, request, 5)).code == ResponseCode.SUCCESS
            async with RemotingClient() as third:
                with pytest.raises(RemotingError):
                    await third.invoke(broker.address, request, 5)
            samples = await scrape(broker.metrics.port)
            port = str(broker.port)
            assert value(samples, "rocketmq_remoting_connections", port=port) == 2
            assert value(samples, "rocketmq_remoting_connections_refused_total", port=port, reason="server_limit") == 1
            assert value(samples, "rocketmq_remoting_connections_refused_total", reason="address_limit") == 0
        broker.shutdown()
        await broker.wait_stopped()
        nursery.cancel_scope.cancel()
