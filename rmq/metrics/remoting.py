"""Connection metrics of RemotingServers, shared by the broker's and the name server's collectors.

rocketmq_remoting_connections (gauge) and rocketmq_remoting_connections_refused_total
(counter, reason "server_limit" or "address_limit": serverMaxConnections,
serverMaxConnectionsPerAddress) are ours; RocketMQ 5.x has no such series. Each carries
the port the server listens on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rmq.remoting import RemotingServer


def connection_metrics(servers: Iterable[RemotingServer], const: dict[str, str]) -> Iterator[Metric]:
    names = ["port", *const]
    values = [*const.values()]
    held = GaugeMetricFamily(
        "rocketmq_remoting_connections", "Connections held (accepted, not yet closed)", labels=names
    )
    refused = CounterMetricFamily(
        "rocketmq_remoting_connections_refused_total",
        "Connections closed at once: the server or the client's address held its limit",
        labels=["reason", *names],
    )
    for server in servers:
        port = str(server.port)
        held.add_metric([port, *values], server.connection_count)
        for reason, count in sorted(server.refused.items()):
            refused.add_metric([reason, port, *values], count)
    yield held
    yield refused
