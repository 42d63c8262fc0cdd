"""rmq.client's TransactionProducer against the broker: local outcomes and check-backs."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rmq.client import Message
from rmq.client.transaction import TransactionProducer, TransactionState
from rmq.protocol.message import MessageExt

from .cluster import Cluster
from .test_delay import pull_all, queued


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"transactionCheckInterval": "2000", "transactionTimeOut": "1000"}


class Checks:
    def __init__(self, answer: TransactionState) -> None:
        self.answer = answer
        self.asked: list[MessageExt] = []

    async def __call__(self, msg: MessageExt) -> TransactionState:
        self.asked.append(msg)
        return self.answer


async def wait_for(cluster: Cluster, count: int) -> None:
    with trio.fail_after(30):
        while sum(queued(cluster, "TxTopic", q) for q in range(4)) < count:
            await trio.sleep(0.2)


async def all_bodies(cluster: Cluster) -> list[bytes]:
    bodies = []
    for q in range(4):
        bodies += [m.body for m in await pull_all(cluster, "TxTopic", q)]
    return sorted(bodies)


async def test_local_outcomes_and_check_backs(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    checks = Checks(TransactionState.COMMIT)
    seen: list[Any] = []

    def local(msg: Message, arg: Any) -> TransactionState:
        seen.append(arg)
        if arg == "boom":
            raise RuntimeError("database down")
        return arg  # type: ignore[no-any-return]

    async with TransactionProducer("TXG", cluster.namesrv.address, check=checks) as producer:
        committed = await producer.send_message_in_transaction(
            Message("TxTopic", b"commit", delay_level=3), local, TransactionState.COMMIT
        )
        assert committed.local_state is TransactionState.COMMIT
        await wait_for(cluster, 1)
        assert await all_bodies(cluster) == [b"commit"]  # the delay level was dropped from the half

        rolled = await producer.send_message_in_transaction(
            Message("TxTopic", b"rollback"), local, TransactionState.ROLLBACK
        )
        assert rolled.local_state is TransactionState.ROLLBACK
        unknown = await producer.send_message_in_transaction(
            Message("TxTopic", b"ask later"), local, TransactionState.UNKNOWN
        )
        failed = await producer.send_message_in_transaction(Message("TxTopic", b"boom"), local, "boom")
        assert failed.local_state is TransactionState.UNKNOWN
        assert seen == [TransactionState.COMMIT, TransactionState.ROLLBACK, TransactionState.UNKNOWN, "boom"]

        await wait_for(cluster, 3)  # both unknown ones committed by the check-back
        assert await all_bodies(cluster) == [b"ask later", b"boom", b"commit"]
        asked = {m.body: m for m in checks.asked}
        assert set(asked) == {b"ask later", b"boom"}
        assert asked[b"ask later"].topic == "TxTopic"
        assert asked[b"ask later"].msg_id == unknown.send_result.msg_id
        await trio.sleep(5)
        assert len(checks.asked) == 2 and cluster.broker.transactions.pending_count() == 0
        assert rolled.send_result.queue_offset != committed.send_result.queue_offset


async def test_without_a_check_listener_checks_are_unknown(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with TransactionProducer("TXG2", cluster.namesrv.address) as producer:
        await producer.send_message_in_transaction(Message("TxTopic", b"?"), lambda m, a: TransactionState.UNKNOWN)
        with trio.fail_after(30):
            while cluster.broker.transactions.checks_sent < 2:
                await trio.sleep(0.5)
        assert cluster.broker.transactions.pending_count() == 1
