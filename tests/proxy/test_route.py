"""QueryRoute as Java's RouteActivity (issue 44): the queues of every broker of a group,
master and slave, numbered read-only, write-only, then read-write, each naming the proxy."""

from __future__ import annotations

from pathlib import Path

import trio

from rmq.client.config import ClientConfig
from rmq.client.instance import ClientInstance
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.proxy.grpc import Call
from rmq.proxy.service import MessagingService, host_port
from rmq.proxy.v2 import definition_pb2 as d
from rmq.remoting import RemotingClient

from ..broker.cluster import loopback_namesrv, start_broker
from .conftest import run_client

TOPIC = "ProxyRouteTopic"


async def create_topic(addr: str, read: int, write: int, perm: int) -> None:
    header = CreateTopicRequestHeader(TOPIC, read_queue_nums=read, write_queue_nums=write, perm=perm)
    async with RemotingClient() as client:
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        response = await client.invoke(addr, request, 3.0)
        assert response.code == ResponseCode.SUCCESS, response


async def test_query_route_lists_every_broker_of_a_group(tmp_path: Path) -> None:
    async with loopback_namesrv() as namesrv, trio.open_nursery() as nursery:
        master = await start_broker(nursery, tmp_path / "a0", namesrv)
        await start_broker(nursery, tmp_path / "a1", namesrv, brokerRole="SLAVE", brokerId="1")
        other = await start_broker(nursery, tmp_path / "b0", namesrv, brokerName="broker-b")
        await create_topic(master.address, read=4, write=2, perm=6)  # 2 read-only, 2 read-write
        await create_topic(other.address, read=3, write=3, perm=2)  # write-only
        instance = ClientInstance(ClientConfig(namesrv=(namesrv.address,)))
        with trio.fail_after(20):
            async with instance.running():
                while True:  # until the name server has both groups, the slave too
                    route = await instance.fetch_route(TOPIC)
                    if route is not None and len(route.queue_datas) == 2:
                        brokers = {b.broker_name: sorted(b.addrs) for b in route.broker_datas}
                        if brokers == {"broker-a": [0, 1], "broker-b": [0]}:
                            break
                    await trio.sleep(0.1)
        config = ProxyConfig.from_mapping(
            {"namesrvAddr": namesrv.address, "grpcServerPort": 0, "localServeAddr": "proxy.test:8081"}
        )
        async with ProxyServer(config, host="127.0.0.1") as proxy:
            lines = await run_client(f"127.0.0.1:{proxy.port}", "route", TOPIC, "g")
        assert all(line.pop("endpoints") == ["proxy.test:8081"] for line in lines)
        got = {(q["broker"], q["broker_id"], q["id"]): q["perm"] for q in lines}
        a = {0: "READ", 1: "READ", 2: "READ_WRITE", 3: "READ_WRITE"}
        want = {("broker-a", bid, qid): perm for bid in (0, 1) for qid, perm in a.items()}
        want.update({("broker-b", 0, qid): "WRITE" for qid in range(3)})
        assert got == want and len(lines) == len(want)
        nursery.cancel_scope.cancel()


def test_the_endpoints_named_come_from_any_authority() -> None:
    """The proxy names itself as the client dialed it (:authority), whatever that holds; a
    port it cannot read is the connection's own (a client's :authority without one, found
    by `rmq fuzz --grpc`, was a ValueError)."""
    service = MessagingService(ProxyConfig(), ClientInstance(ClientConfig(namesrv=("127.0.0.1:1",))))

    def named(authority: str) -> tuple[int, str, int]:
        call = Call("QueryRoute", {":authority": authority}, ("127.0.0.1", 5), local=("10.0.0.9", 8081))
        e = service.endpoints(call, None)
        return e.scheme, e.addresses[0].host, e.addresses[0].port

    assert named("proxy.example:9000") == (d.DOMAIN_NAME, "proxy.example", 9000)
    assert named("127.0.0.1:8081") == (d.IPv4, "127.0.0.1", 8081)
    assert named("[::1]:8081") == (d.IPv6, "::1", 8081)
    assert named("proxy.example") == (d.DOMAIN_NAME, "proxy.example", 8081)
    assert named("rmq-fuzz") == (d.DOMAIN_NAME, "rmq-fuzz", 8081)
    assert named("host:99999999999") == (d.DOMAIN_NAME, "host", 8081)
    assert named("::1") == (d.IPv6, "::1", 8081)
    assert named("") == (d.IPv4, "10.0.0.9", 8081)
    assert host_port("[::1]") == ("::1", None) and host_port("a:b") == ("a", None)
