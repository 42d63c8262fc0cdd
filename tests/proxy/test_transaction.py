"""Transactional messages of the official 5.x client through the proxy (issue 44):
EndTransaction, and the broker's check reaching the client's checker over Telemetry."""

from __future__ import annotations

import pytest

from rmq.client.config import ClientConfig
from rmq.client.instance import ClientInstance
from rmq.proxy import ProxyServer
from rmq.proxy.channels import Channels
from rmq.proxy.convert import Code, ProxyError
from rmq.proxy.transaction import Transactions
from rmq.proxy.v2 import definition_pb2 as d
from rmq.proxy.v2 import service_pb2 as s
from tests.client.conftest import Cluster

from .conftest import TX_TOPIC, run_client

TOPIC = TX_TOPIC
GROUP = "TxGroup"


async def test_commit_is_visible(tx_cluster: Cluster, tx_proxy: ProxyServer) -> None:
    endpoint = f"127.0.0.1:{tx_proxy.port}"
    sent, ended = await run_client(endpoint, "commit", TOPIC, GROUP)
    assert ended == {"ended": 20000}
    got = await run_client(endpoint, "receive", TOPIC, GROUP, "1")
    assert got[-1] == {"received": 1}
    assert got[0]["id"] == sent["sent"] and got[0]["body"] == "tx-commit"


async def test_rollback_is_never_visible(tx_cluster: Cluster, tx_proxy: ProxyServer) -> None:
    endpoint = f"127.0.0.1:{tx_proxy.port}"
    _, ended = await run_client(endpoint, "rollback", TOPIC, GROUP)
    assert ended == {"ended": 20000}
    # past the broker's check time (1 s): a rolled back half message is not checked back either
    got = await run_client(endpoint, "receive_no_ack", TOPIC, GROUP, "1", "4")
    assert got == [{"received": 0}]
    assert tx_cluster.broker.transactions.checks_sent == 0


async def test_check_reaches_the_clients_checker(tx_cluster: Cluster, tx_proxy: ProxyServer) -> None:
    """Not ended, the half message is checked by the broker; the proxy, a producer of the
    topic's group, passes the check down the client's Telemetry stream and the checker's
    commit makes the message visible."""
    endpoint = f"127.0.0.1:{tx_proxy.port}"
    lines = await run_client(endpoint, "check", TOPIC, GROUP)
    sent = lines[0]["sent"]
    assert {"checked": sent, "body": "tx-check"} in lines and lines[-1] == {"was_checked": True}
    got = await run_client(endpoint, "receive", TOPIC, GROUP, "1")
    assert got[-1] == {"received": 1} and got[0]["id"] == sent and got[0]["body"] == "tx-check"


async def test_end_without_transaction_data_is_invalid_transaction_id() -> None:
    """An EndTransaction whose half message this proxy did not see, or saw longer ago than
    transactionDataExpireMillis, is INVALID_TRANSACTION_ID (Java: TRANSACTION_DATA_NOT_FOUND)."""
    transactions = Transactions(ClientInstance(ClientConfig(namesrv=("127.0.0.1:1",))), 0, Channels())
    transactions.add(TOPIC, "tx-1", "broker-a", 0, 0)  # expires at once
    for transaction_id in ("tx-1", "tx-2"):
        request = s.EndTransactionRequest(topic=d.Resource(name=TOPIC), transaction_id=transaction_id)
        with pytest.raises(ProxyError) as caught:
            await transactions.end(request)
        assert caught.value.code == Code.INVALID_TRANSACTION_ID
    assert transactions.data == {}
