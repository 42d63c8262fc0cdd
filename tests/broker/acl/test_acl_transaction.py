"""Transactions under ACL: the half message, END_TRANSACTION and the answer to a check-back
(sent on the broker's own connection) are all signed."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rmq.broker.acl import service
from rmq.client import Message
from rmq.client.transaction import TransactionProducer, TransactionState
from rmq.protocol.message import MessageExt

from ..cluster import Cluster
from .conftest import USER


@pytest.fixture
def broker_props(acl_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(service, "WATCH_INTERVAL", 0.05)
    return {
        "aclEnable": "true",
        "rocketmqHome": str(acl_home),
        "transactionCheckInterval": "2000",
        "transactionTimeOut": "1000",
    }


def queued(cluster: Cluster, topic: str) -> int:
    return sum(cluster.broker.message_store.get_max_offset_in_queue(topic, q) for q in range(4))


async def test_transaction_commit_and_check_back_with_credentials(
    cluster: Cluster, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[MessageExt] = []

    async def check(msg: MessageExt) -> TransactionState:
        asked.append(msg)
        return TransactionState.COMMIT

    async with TransactionProducer(
        "TXG", cluster.namesrv.address, check=check, access_key=USER[0], secret_key=USER[1]
    ) as producer:
        done = await producer.send_message_in_transaction(
            Message("TopicPub", b"now"), lambda m, a: TransactionState.COMMIT
        )
        assert done.local_state is TransactionState.COMMIT
        later = await producer.send_message_in_transaction(
            Message("TopicPub", b"later"), lambda m, a: TransactionState.UNKNOWN
        )
        assert later.local_state is TransactionState.UNKNOWN
        with trio.fail_after(60):
            while queued(cluster, "TopicPub") < 2:
                await trio.sleep(0.2)
    assert [m.body for m in asked] == [b"later"]
    assert "ACL refused" not in caplog.text
