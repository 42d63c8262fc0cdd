"""Transactions: the END_TRANSACTION table cell by cell, then half messages, check-backs and
restarts end to end over 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from rmq.broker.transaction import TRANSITIONS, Action, Input, State
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rmq.protocol.message import TRANSACTION_COMMIT_TYPE, decode_record, iter_records, parse_offset_msg_id
from rmq.remoting import Dispatcher, RemotingClient, RemotingTimeoutError
from rmq.remoting.abc import RequestContext

from .cluster import Cluster
from .test_delay import pull_all, queued
from .test_send_pull import send_ext

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0

# -- the table ---------------------------------------------------------------------------

S, I, A = State, Input, Action  # noqa: E741 - short names keep the table readable
EXPECTED = [
    (S.HALF, I.COMMIT, S.COMMITTED, A.COMMIT),
    (S.HALF, I.ROLLBACK, S.ROLLED_BACK, A.ROLLBACK),
    (S.HALF, I.UNKNOWN, S.HALF, A.NONE),
    (S.HALF, I.CHECK, S.HALF, A.CHECK),
    (S.HALF, I.CHECK_LIMIT, S.DISCARDED, A.DISCARD),
    (S.COMMITTED, I.COMMIT, S.COMMITTED, A.NONE),
    (S.COMMITTED, I.ROLLBACK, S.COMMITTED, A.REJECT),
    (S.COMMITTED, I.UNKNOWN, S.COMMITTED, A.NONE),
    (S.COMMITTED, I.CHECK, S.COMMITTED, A.NONE),
    (S.COMMITTED, I.CHECK_LIMIT, S.COMMITTED, A.NONE),
    (S.ROLLED_BACK, I.COMMIT, S.ROLLED_BACK, A.REJECT),
    (S.ROLLED_BACK, I.ROLLBACK, S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.UNKNOWN, S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.CHECK, S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.CHECK_LIMIT, S.ROLLED_BACK, A.NONE),
    (S.DISCARDED, I.COMMIT, S.COMMITTED, A.COMMIT),
    (S.DISCARDED, I.ROLLBACK, S.ROLLED_BACK, A.ROLLBACK),
    (S.DISCARDED, I.UNKNOWN, S.DISCARDED, A.NONE),
    (S.DISCARDED, I.CHECK, S.DISCARDED, A.NONE),
    (S.DISCARDED, I.CHECK_LIMIT, S.DISCARDED, A.NONE),
]


def test_every_cell_is_defined() -> None:
    assert set(TRANSITIONS) == {(s, i) for s in State for i in Input}


@pytest.mark.parametrize(("state", "what", "after", "action"), EXPECTED, ids=lambda v: getattr(v, "value", v))
def test_cell(state: State, what: Input, after: State, action: Action) -> None:
    assert TRANSITIONS[(state, what)] == (after, action)


def test_the_real_message_is_put_only_from_a_live_half() -> None:
    putters = {s for (s, i), (_, a) in TRANSITIONS.items() if a is Action.COMMIT}
    assert putters == {State.HALF, State.DISCARDED}
    for (state, _), (after, _) in TRANSITIONS.items():
        if state in (State.COMMITTED, State.ROLLED_BACK):
            assert after is state  # outcomes are final


# -- end to end --------------------------------------------------------------------------


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"transactionCheckInterval": "2000", "transactionTimeOut": "1000", "transactionCheckMax": "3"}


class Producer:
    """A producer connection that answers CHECK_TRANSACTION_STATE with `answer` (None: silence)."""

    def __init__(self, cluster: Cluster, client: RemotingClient) -> None:
        self.cluster = cluster
        self.client = client
        self.checks: list[tuple[CheckTransactionStateRequestHeader, Any]] = []
        self.answer: int | None = None

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        msg, _ = decode_record(request.body)
        self.checks.append((header, msg))
        if self.answer is not None:
            end = EndTransactionRequestHeader(
                producer_group=msg.properties["PGROUP"],
                tran_state_table_offset=header.tran_state_table_offset,
                commit_log_offset=header.commit_log_offset,
                commit_or_rollback=self.answer,
                msg_id=header.msg_id or "",
                from_transaction_check=True,
            )
            await ctx.connection.invoke_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext()))
        return None

    async def heartbeat(self) -> None:
        body = json.dumps({"clientID": "tx-client", "producerDataSet": [{"groupName": "PG"}]}).encode()
        r = await self.client.invoke(
            self.cluster.broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=body), 5
        )
        assert r.code == 0


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    dispatcher = Dispatcher()
    async with RemotingClient(dispatcher=dispatcher) as client:
        p = Producer(cluster, client)
        dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, p)
        await p.heartbeat()
        yield p


async def send_half(cluster: Cluster, body: bytes, key: str, **props: str) -> tuple[int, int]:
    """(half queue offset, CommitLog offset) of a new half message."""
    r = await cluster.call(
        RequestCode.SEND_MESSAGE,
        send_ext(
            topic="Pay", queue_id=1, sys_flag=4, props={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": key, **props}
        ),
        body,
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["queueOffset"]), parse_offset_msg_id(r.ext_fields["msgId"])[2]


async def end(
    cluster: Cluster, offsets: tuple[int, int], kind: int, key: str = "K", group: str = "PG", timeout: float = 5
) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=offsets[0],
        commit_log_offset=offsets[1],
        commit_or_rollback=kind,
        msg_id=key,
    )
    return await cluster.call(RequestCode.END_TRANSACTION, header.to_ext(), timeout=timeout)


async def ops(cluster: Cluster) -> list[Any]:
    await cluster.broker.store.wait_dispatched()
    r = await cluster.call(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "CG",
            "topic": OP,
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 32,
            "sysFlag": 4,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subVersion": 0,
            "subscription": "*",
        },
    )
    return list(iter_records(r.body)) if r.code == 0 else []


async def test_commit_puts_the_real_message_once(cluster: Cluster) -> None:
    half = await send_half(cluster, b"order-1", "K1", TAGS="Paid")
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, "Pay", 1) == 0 and queued(cluster, HALF, 0) == 1
    r = await end(cluster, half, COMMIT, "K1")
    assert r.code == ResponseCode.SUCCESS, r.remark
    (m,) = await pull_all(cluster, "Pay", 1)
    assert m.body == b"order-1" and m.topic == "Pay" and m.queue_id == 1
    assert "TRAN_MSG" not in m.properties and m.properties["UNIQ_KEY"] == "K1" and m.properties["TAGS"] == "Paid"
    assert m.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE and m.prepared_transaction_offset == half[1]
    (op,) = await ops(cluster)
    assert op.tags == "d" and op.body == str(half[0]).encode()
    assert op.commitlog_offset == m.commitlog_offset + m.store_size  # written with it, in one piece
    # a duplicate commit changes nothing; a rollback now is refused
    assert (await end(cluster, half, COMMIT, "K1")).code == ResponseCode.SUCCESS
    assert (await end(cluster, half, ROLLBACK, "K1")).code == ResponseCode.TRANSACTION_FAILED
    assert queued(cluster, "Pay", 1) == 1 and len(await ops(cluster)) == 1


async def test_rollback_writes_only_the_op_record(cluster: Cluster) -> None:
    half = await send_half(cluster, b"cancelled", "K2")
    assert (await end(cluster, half, ROLLBACK, "K2")).code == ResponseCode.SUCCESS
    assert (await end(cluster, half, COMMIT, "K2")).code == ResponseCode.TRANSACTION_FAILED
    assert queued(cluster, "Pay", 1) == 0 and len(await ops(cluster)) == 1


async def test_end_checks_the_request(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    qo, phy = await send_half(cluster, b"x", "K3")
    r = await end(cluster, (qo, phy), COMMIT, group="OTHER")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    r = await end(cluster, (qo + 5, phy), COMMIT)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await end(cluster, (qo, phy + 1), COMMIT)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    with pytest.raises(RemotingTimeoutError):  # UNKNOWN is not answered, as in RocketMQ
        await end(cluster, (qo, phy), UNKNOWN, timeout=1)
    assert queued(cluster, "Pay", 1) == 0


async def test_a_committed_delayed_message_waits_its_level(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    half = await send_half(cluster, b"later", "K4", DELAY="1")
    assert (await end(cluster, half, COMMIT, "K4")).code == 0
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, "Pay", 1) == 0 and queued(cluster, "SCHEDULE_TOPIC_XXXX", 0) == 1
    await trio.sleep(1.5)
    (m,) = await pull_all(cluster, "Pay", 1)
    assert m.body == b"later"


async def test_check_back_asks_the_producer(
    cluster: Cluster, producer: Producer, autojump_clock: trio.testing.MockClock
) -> None:
    qo, phy = await send_half(cluster, b"ask me", "K5")
    producer.answer = COMMIT
    with trio.fail_after(10):
        while queued(cluster, "Pay", 1) == 0:
            await trio.sleep(0.1)
    ((header, msg),) = producer.checks
    # asked about the re-appended copy, which counts the check
    assert header.tran_state_table_offset == qo + 1 and header.msg_id == header.transaction_id == "K5"
    assert msg.topic == "Pay" and msg.queue_id == 1 and msg.body == b"ask me"
    assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1" and msg.queue_offset == qo + 1
    assert header.commit_log_offset == msg.commitlog_offset != phy
    (m,) = await pull_all(cluster, "Pay", 1)
    assert m.prepared_transaction_offset == header.commit_log_offset
    assert "TRANSACTION_CHECK_TIMES" not in m.properties
    await trio.sleep(10)
    assert len(producer.checks) == 1  # ended: never asked again


async def test_unanswered_checks_end_in_a_discard(
    cluster: Cluster, producer: Producer, autojump_clock: trio.testing.MockClock
) -> None:
    half = await send_half(cluster, b"forgotten", "K6")
    with trio.fail_after(60):
        while queued(cluster, "TRANS_CHECK_MAX_TIME_TOPIC", 0) == 0:
            await trio.sleep(0.5)
    assert [m.properties["TRANSACTION_CHECK_TIMES"] for _, m in producer.checks] == ["1", "2", "3"]
    await trio.sleep(10)
    assert len(producer.checks) == 3
    (discarded,) = await pull_all(cluster, "TRANS_CHECK_MAX_TIME_TOPIC", 0)
    assert discarded.body == b"forgotten" and discarded.properties["REAL_TOPIC"] == "Pay"
    assert (await ops(cluster))[-1].commitlog_offset == discarded.commitlog_offset + discarded.store_size
    # a late answer still counts, as in RocketMQ
    assert (await end(cluster, half, COMMIT, "K6")).code == ResponseCode.SUCCESS
    assert queued(cluster, "Pay", 1) == 1


async def test_state_survives_a_restart(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    committed = await send_half(cluster, b"committed", "A")
    rolled = await send_half(cluster, b"rolled back", "B")
    waiting = await send_half(cluster, b"waiting", "C")
    assert (await end(cluster, committed, COMMIT, "A")).code == 0
    assert (await end(cluster, rolled, ROLLBACK, "B")).code == 0
    await trio.sleep(2.5)  # one check round: "C" was re-appended with one check counted
    assert cluster.broker.transactions.chains[waiting[0]].check_times == 1
    await cluster.restart()
    tx = cluster.broker.transactions
    states = {o: c.state for o, c in tx.chains.items()}
    assert states.get(waiting[0]) is State.HALF
    assert tx.chains[waiting[0]].check_times >= 1  # counted in the half queue, not in memory
    assert tx.low >= waiting[0]
    # duplicates after the restart change nothing (ended chains below `low` are only known as ended)
    assert (await end(cluster, committed, COMMIT, "A")).code == 0
    assert (await end(cluster, rolled, COMMIT, "B")).code in (0, ResponseCode.TRANSACTION_FAILED)
    assert [m.body for m in await pull_all(cluster, "Pay", 1)] == [b"committed"]
    # the waiting one can still be committed through its first copy
    assert (await end(cluster, waiting, COMMIT, "C")).code == 0
    assert [m.body for m in await pull_all(cluster, "Pay", 1)] == [b"committed", b"waiting"]
    await cluster.restart()
    assert cluster.broker.transactions.pending_count() == 0
    assert (await end(cluster, waiting, COMMIT, "C")).code == 0
    assert queued(cluster, "Pay", 1) == 2
