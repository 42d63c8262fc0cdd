"""Processors and services are built from a broker's parts (rmq/broker/parts.py), not from
its controller: here over a store in tmp_path, served on a loopback port."""

from __future__ import annotations

from pathlib import Path

from rmq.broker.config import BrokerRole
from rmq.broker.processors import build_dispatcher
from rmq.broker.schedule import ScheduleService
from rmq.broker.transaction import TransactionService
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rmq.protocol.message import iter_records
from rmq.remoting import RemotingClient
from rmq.remoting.testing import serve_on_loopback

from .parts import broker_parts


def send_request(topic: str, body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="PG", topic=topic, queue_id=1, born_timestamp=1_700_000_000_000)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), body)


def pull_request(topic: str) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="CG",
        topic=topic,
        queue_id=1,
        queue_offset=0,
        sys_flag=0x4,  # the subscription comes with the pull (no heartbeat)
        subscription="*",
        suspend_timeout_millis=0,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


async def test_the_dispatcher_over_parts_stores_and_serves_a_message(tmp_path: Path) -> None:
    with broker_parts(tmp_path) as parts:
        parts.topics.create_if_absent("Parts", 4, 6)
        dispatcher = build_dispatcher(parts, ScheduleService(parts), TransactionService(parts))
        async with serve_on_loopback(dispatcher) as server, RemotingClient() as client:
            sent = await client.invoke(server.address, send_request("Parts", b"from parts"), 5.0)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            parts.message_store.dispatch_pending()
            pulled = await client.invoke(server.address, pull_request("Parts"), 5.0)
            assert pulled.code == ResponseCode.SUCCESS, pulled.remark
            assert [m.body for m in iter_records(pulled.body)] == [b"from parts"]


async def test_a_role_change_is_seen_by_processors_built_before_it(tmp_path: Path) -> None:
    """A DLedger election replaces the configuration in the role cell; processors read it
    there at each request."""
    with broker_parts(tmp_path) as parts:
        parts.topics.create_if_absent("Parts", 4, 6)
        dispatcher = build_dispatcher(parts, ScheduleService(parts), TransactionService(parts))
        async with serve_on_loopback(dispatcher) as server, RemotingClient() as client:
            parts.role.config = parts.config.replace(broker_role=BrokerRole.SLAVE, broker_id=1)
            refused = await client.invoke(server.address, send_request("Parts", b"to a slave"), 5.0)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert parts.message_store.max_phy_offset == 0
