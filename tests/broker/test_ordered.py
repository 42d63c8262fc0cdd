"""Orderly consumption at the broker: queue locks as rebalancing clients use them."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from rmq.protocol import RequestCode
from rmq.protocol import body as json_body

from .cluster import Cluster


def queues(*ids: int) -> list[dict[str, Any]]:
    return [{"brokerName": "broker-a", "queueId": i, "topic": "Ordered"} for i in ids]


async def lock(cluster: Cluster, client_id: str, *ids: int, code: int = RequestCode.LOCK_BATCH_MQ) -> set[int]:
    body = json.dumps({"clientId": client_id, "consumerGroup": "OG", "mqSet": queues(*ids)}).encode()
    r = await cluster.call(code, body=body)
    assert r.code == 0, r.remark
    return {mq["queueId"] for mq in (json_body.loads(r.body)["lockOKMQSet"] if r.body else [])}


async def test_a_live_holder_keeps_its_queues(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    assert await lock(cluster, "c1", 0, 1) == {0, 1}
    # c2 rebalanced to all four queues: it gets only the free ones
    assert await lock(cluster, "c2", 0, 1, 2, 3) == {2, 3}
    for _ in range(6):  # c1 renews every 20 s (the client's rebalance lock interval), for two minutes
        await trio.sleep(20)
        assert await lock(cluster, "c1", 0, 1) == {0, 1}
        assert await lock(cluster, "c2", 0, 1, 2, 3) == {2, 3}
    # only the holder can unlock; then the queue is free at once
    await lock(cluster, "c2", 0, code=RequestCode.UNLOCK_BATCH_MQ)
    assert await lock(cluster, "c2", 0) == set()
    await lock(cluster, "c1", 0, code=RequestCode.UNLOCK_BATCH_MQ)
    assert await lock(cluster, "c2", 0) == {0}


async def test_a_silent_holder_loses_its_queues_after_60_s(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    assert await lock(cluster, "c1", 5) == {5}
    await trio.sleep(59)
    assert await lock(cluster, "c2", 5) == set()
    await trio.sleep(2)
    assert await lock(cluster, "c2", 5) == {5}
    assert await lock(cluster, "c1", 5) == set()
