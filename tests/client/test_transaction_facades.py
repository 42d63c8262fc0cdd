"""TransactionProducer from asyncio and from blocking code, against a real broker: a
committed half message reaches consumers, a rolled back one never does."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from rmq.client import ConsumeFromWhere, Message, SendStatus, TransactionState, aio, blocking


def _delivered(ns: str, topic: str, group: str, want: int) -> list[bytes]:
    """The bodies on `topic` once `want` arrived (or after about 20 s)."""
    got: list[bytes] = []
    with blocking.PullConsumer(group, ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET) as consumer:
        consumer.subscribe(topic)
        for _ in range(40):
            got += [m.body for m in consumer.poll(timeout=0.5)]
            if len(got) >= want:
                break
    return sorted(got)


def test_asyncio_transactions(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("AioTx", 1)
    ns = rmq_cluster.namesrv

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()

        async def local(msg: Any, arg: TransactionState) -> TransactionState:
            assert asyncio.get_running_loop() is loop  # a coroutine runs on the application's loop
            return arg

        outcomes = ((b"rolled back", TransactionState.ROLLBACK), (b"committed", TransactionState.COMMIT))
        async with aio.TransactionProducer("aio-tx", ns) as producer:
            return [
                await producer.send_message_in_transaction(Message("AioTx", body), local, state)
                for body, state in outcomes
            ]

    results = asyncio.run(main())
    assert [(r.send_result.status, r.local_state) for r in results] == [
        (SendStatus.SEND_OK, TransactionState.ROLLBACK),
        (SendStatus.SEND_OK, TransactionState.COMMIT),
    ]
    assert _delivered(ns, "AioTx", "aio-tx-reader", 1) == [b"committed"]


def test_blocking_transactions_run_the_local_transaction_in_the_calling_thread(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("BlockingTx", 1)
    ns = rmq_cluster.namesrv
    threads: list[int] = []

    def local(msg: Any, arg: TransactionState) -> TransactionState:
        threads.append(threading.get_ident())
        if arg is TransactionState.UNKNOWN:
            raise RuntimeError("the database is down")  # taken as UNKNOWN: the broker asks later
        return arg

    with blocking.TransactionProducer("blk-tx", ns, check=lambda msg: TransactionState.ROLLBACK) as producer:
        results = [
            producer.send_message_in_transaction(Message("BlockingTx", body), local, state)
            for body, state in (
                (b"rolled back", TransactionState.ROLLBACK),
                (b"failed", TransactionState.UNKNOWN),
                (b"committed", TransactionState.COMMIT),
            )
        ]
    assert threads == [threading.get_ident()] * 3
    assert [r.local_state for r in results] == [
        TransactionState.ROLLBACK,
        TransactionState.UNKNOWN,
        TransactionState.COMMIT,
    ]
    assert all(r.send_result.status is SendStatus.SEND_OK for r in results)
    assert _delivered(ns, "BlockingTx", "blk-tx-reader", 1) == [b"committed"]
