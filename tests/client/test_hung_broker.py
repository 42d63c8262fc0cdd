"""A broker that stops answering (a paused leader: its socket stays open, the kernel takes
the bytes, nothing comes back). A send to it times out; the producer then fetches the
topic's route for real, whatever is left of the send's time, and its next send goes where
the route now says, and not to the broker that timed out."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from rmq.client import Message, MessageQueue, MQClientError, MQTimeoutError, Producer, SendResult
from rmq.client.config import ClientConfig
from rmq.client.instance import ROUTE_RETRY_INTERVAL, ClientInstance
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.bodies import DataVersion, TopicConfig
from rmq.protocol.bodies.register import RegisterBrokerBody as RegisterBody
from rmq.protocol.bodies.register import encode_register_body
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.remoting import RemotingClient

from ..broker.cluster import loopback_namesrv, start_broker

TOPIC = "Moving"
SEND_TIMEOUT = 1.0
# after the first send times out, the next one is answered by then; without a refresh it
# would wait for the 30 s route poll
FOLLOW_UP = 2.0

SendResultOrError = SendResult | MQClientError


class HungBroker:
    """A listening socket on 127.0.0.1 that accepts and reads, and never writes."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.address = f"127.0.0.1:{listener.socket.getsockname()[1]}"
        self.received = 0

    async def serve(self, stream: trio.abc.Stream) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                self.received += len(data)


@asynccontextmanager
async def hung_broker() -> AsyncIterator[HungBroker]:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    hung = HungBroker(listener)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hung.serve, [listener])
        yield hung
        nursery.cancel_scope.cancel()


async def register_by_hand(client: RemotingClient, namesrv: str, addr: str, name: str) -> None:
    """REGISTER_BROKER for `addr` as the master of `name` with TOPIC (4 queues), as a 4.x
    broker sends it (no stateVersion). The name server keeps it while `client` is open."""
    body = encode_register_body(RegisterBody(DataVersion(1, 1), {TOPIC: TopicConfig(TOPIC, 4, 4, 6)}, []))
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "C",
        "haServerAddr": addr,
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    response = await client.invoke(namesrv, RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body), 3.0)
    assert response.code == ResponseCode.SUCCESS, response


async def serve_topic(client: RemotingClient, ns: NamesrvServer, addr: str) -> None:
    """Create TOPIC on the broker at `addr` and wait until the name server routes it there."""
    header = CreateTopicRequestHeader(TOPIC, read_queue_nums=4, write_queue_nums=4, perm=6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    assert (await client.invoke(addr, request, 3.0)).code == ResponseCode.SUCCESS
    with trio.fail_after(10):
        while True:
            route = ns.routes.pickup_topic_route(TOPIC) or {"brokerDatas": []}
            if any(addr in bd["brokerAddrs"].values() for bd in route["brokerDatas"]):
                return
            await trio.sleep(0.02)


@pytest.mark.parametrize("moved_to", ["broker-b", "broker-a"], ids=["another group", "a new master of the group"])
async def test_after_a_timeout_the_next_send_goes_where_the_route_now_says(tmp_path: Path, moved_to: str) -> None:
    """The producer knows only the hung broker when the route moves: to another group, or to
    a new master of the same group (a DLedger election, an operator's swap). The send in
    flight times out; the next one is answered by the real broker at once."""
    async with (
        loopback_namesrv() as ns,
        hung_broker() as hung,
        RemotingClient() as by_hand,
        trio.open_nursery() as nursery,
    ):
        await register_by_hand(by_hand, ns.address, hung.address, "broker-a")
        async with Producer("pg_moving", ns.address, send_timeout=SEND_TIMEOUT) as producer:
            queues = await producer.fetch_publish_queues(TOPIC)  # the hung broker's, cached
            assert {q.broker_name for q in queues} == {"broker-a"}
            real = await start_broker(nursery, tmp_path / "real", ns, brokerName=moved_to)
            await serve_topic(by_hand, ns, real.address)

            with pytest.raises(MQTimeoutError) as info:
                await producer.send(Message(TOPIC, b"to the hung one"))
            timed_out = trio.current_time()
            assert info.value.address == hung.address and hung.received > 0

            result = await producer.send(Message(TOPIC, b"to the new one"))
            took = trio.current_time() - timed_out
            assert result.status.value == "SEND_OK"
            assert result.message_queue.broker_name == moved_to
            assert producer.instance.master_addr(moved_to) == real.address
            assert took < FOLLOW_UP, f"the next send took {took:.2f} s after the timeout"
        real.shutdown()


@pytest.mark.parametrize("moved_to", ["broker-b", "broker-a"], ids=["another group", "a new master of the group"])
async def test_a_send_waiting_on_the_hung_broker_moves_when_the_route_does(tmp_path: Path, moved_to: str) -> None:
    """The route moves only while the next send already waits on the hung broker (the
    election ends after the first timeout): that send is given up and sent again where the
    route now says, long before its own timeout."""
    async with (
        loopback_namesrv() as ns,
        hung_broker() as hung,
        RemotingClient() as by_hand,
        trio.open_nursery() as nursery,
    ):
        await register_by_hand(by_hand, ns.address, hung.address, "broker-a")
        async with Producer("pg_late", ns.address, send_timeout=SEND_TIMEOUT) as producer:
            with pytest.raises(MQTimeoutError):
                await producer.send(Message(TOPIC, b"to the hung one"))
            second: list[SendResultOrError] = []

            async def send_again() -> None:
                try:
                    second.append(await producer.send(Message(TOPIC, b"to the new one"), timeout=10.0))
                except MQClientError as exc:
                    second.append(exc)

            received = hung.received
            nursery.start_soon(send_again)
            with trio.fail_after(SEND_TIMEOUT):
                while hung.received == received:  # the second send waits on the hung broker
                    await trio.sleep(0.01)
            real = await start_broker(nursery, tmp_path / "real", ns, brokerName=moved_to)
            await serve_topic(by_hand, ns, real.address)
            registered = trio.current_time()
            with trio.fail_after(11.0):
                while not second:
                    await trio.sleep(0.01)
            took = trio.current_time() - registered
            (result,) = second
            assert isinstance(result, SendResult), result
            assert result.status.value == "SEND_OK" and result.message_queue.broker_name == moved_to
            # the route is fetched once a second while the send waits
            assert took < ROUTE_RETRY_INTERVAL + 1.5, f"answered {took:.2f} s after the new route"
        real.shutdown()


async def test_with_the_same_route_later_sends_avoid_the_broker_that_timed_out(tmp_path: Path) -> None:
    """Both groups are in the route all along: after a send to the hung one times out,
    every later send goes to the other one at once (its faults isolate the hung group)."""
    async with (
        loopback_namesrv() as ns,
        hung_broker() as hung,
        RemotingClient() as by_hand,
        trio.open_nursery() as nursery,
    ):
        await register_by_hand(by_hand, ns.address, hung.address, "broker-a")
        real = await start_broker(nursery, tmp_path / "real", ns, brokerName="broker-b")
        await serve_topic(by_hand, ns, real.address)
        async with Producer("pg_same", ns.address, send_timeout=SEND_TIMEOUT) as producer:
            queues = await producer.fetch_publish_queues(TOPIC)
            assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
            with pytest.raises(MQTimeoutError):
                await producer.send(Message(TOPIC, b"x"), queue=MessageQueue(TOPIC, "broker-a", 0))
            for i in range(8):
                start = trio.current_time()
                result = await producer.send(Message(TOPIC, b"%d" % i))
                assert result.message_queue.broker_name == "broker-b"
                assert trio.current_time() - start < SEND_TIMEOUT / 2
        real.shutdown()


async def test_a_refresh_asked_for_by_a_cancelled_caller_still_runs() -> None:
    """A send whose time is up asks for a refresh from an expired deadline: the refresh runs in
    the instance's nursery, is not cancelled with its caller, and only then holds the slot
    (ROUTE_RETRY_INTERVAL) against more refreshes."""
    async with loopback_namesrv() as ns, RemotingClient() as by_hand:
        await register_by_hand(by_hand, ns.address, "127.0.0.1:1", "broker-a")
        instance = ClientInstance(ClientConfig(namesrv=(ns.address,)))
        async with instance.running():
            with trio.CancelScope() as expired:
                expired.cancel()
                await instance.route_failed(TOPIC)
            with trio.fail_after(2):
                while TOPIC not in instance.routes:
                    await trio.sleep(0.01)
            # within the interval a second failure finds the slot taken: nothing is fetched
            del instance.routes[TOPIC]
            await instance.route_failed(TOPIC)
            assert TOPIC not in instance.routes
            await trio.sleep(ROUTE_RETRY_INTERVAL)
            await instance.route_failed(TOPIC)
            assert TOPIC in instance.routes
