"""Delay levels, retries, dead letters and orderly consumption with the official C++ client.

Real time and real processes (tests/interop); the broker's delay levels are shortened
where a test waits on retries.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest
import trio

from rmq.protocol import RequestCode, ResponseCode
from tests.interop.cpp_client import (
    make_messages,
    produce,
    push_consume,
    requires_cpp_client,
    run_scenario,
    start_scenario,
)

from .cluster import Cluster
from .test_delay import pull_all

pytestmark = [pytest.mark.interop, requires_cpp_client]


async def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    r = await cluster.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6},
    )
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_a_delayed_message_arrives_no_earlier_than_its_level(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, "CppDelay")
    async with start_scenario(push_consume(ns, "CppDelay", 2, group="CG_cpp_delay", time_limit=40)) as run:
        await run.wait_for("started")
        await trio.sleep(2)  # rebalanced
        (await run_scenario(produce(ns, "CppDelay", 1, keys="NOW-{i}"))).check()
        (await run_scenario(produce(ns, "CppDelay", 1, delay_level=2, keys="LATER-{i}"))).check()
        result = (await run.wait()).check()
    by_key = {m.keys: m for m in result.messages}
    later, now = by_key["LATER-0"], by_key["NOW-0"]
    assert later.store_timestamp - later.born_timestamp >= 5000  # level 2 = 5 s
    assert now.store_timestamp - now.born_timestamp < 5000
    assert later.delay_time_level == 0 and later.topic == "CppDelay"
    assert later.properties.get("REAL_TOPIC") == "CppDelay"
    assert result.deliveries.index(later) > result.deliveries.index(now)


@pytest.mark.parametrize("broker_props", [{"messageDelayLevel": " ".join(["1s"] * 18)}])
async def test_failing_consumer_gets_retries_then_the_message_is_a_dead_letter(
    cluster: Cluster, broker_props: dict[str, str]
) -> None:
    ns = cluster.namesrv.address
    group = "CG_cpp_retry"
    await create_topic(cluster, "CppRetry")
    body = json.dumps({"groupName": group, "retryMaxTimes": 2}).encode()
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == 0
    # every delivery fails: the first, then two retries; the third failure is a dead letter
    async with start_scenario(push_consume(ns, "CppRetry", 0, group=group, fail_first=100, time_limit=25)) as run:
        await run.wait_for("started")
        await trio.sleep(2)
        (await run_scenario(produce(ns, "CppRetry", 1, keys="DOOMED", body="doomed"))).check()
        with trio.move_on_after(20):
            while cluster.broker.message_store.get_max_offset_in_queue(f"%DLQ%{group}", 0) == 0:
                await trio.sleep(0.2)
        await trio.sleep(3)  # nothing more should come
        run.kill()
        result = await run.wait()
    deliveries = [m for m in result.deliveries if m.keys == "DOOMED"]
    assert [m.reconsume_times for m in deliveries] == [0, 1, 2]
    assert all(m.topic == "CppRetry" and m.body == b"doomed" for m in deliveries)
    # each retry waited its delay level (1 s here) in SCHEDULE_TOPIC_XXXX
    assert all(b.store_timestamp - a.store_timestamp >= 1000 for a, b in itertools.pairwise(deliveries))
    (dead,) = await pull_all(cluster, f"%DLQ%{group}", 0)
    assert dead.body == b"doomed" and dead.properties["RETRY_TOPIC"] == "CppRetry"
    assert dead.reconsume_times == 3


async def test_orderly_consumer_keeps_per_key_order(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    topic = "CppOrderly"
    await create_topic(cluster, topic)
    keys, per_key = 4, 15
    messages = make_messages(keys * per_key, keys="K{i}", body="{i}", sharding_key=lambda i: i % keys)
    async with start_scenario(
        push_consume(
            ns, topic, keys * per_key, group="CG_cpp_orderly", orderly=True, fail_first=3, linger=1.0, time_limit=60
        )
    ) as run:
        await run.wait_for("started")
        await trio.sleep(2)
        (await run_scenario(produce(ns, topic, messages=messages, method="orderly"))).check()
        result = (await run.wait()).check()
    sequences: dict[int, list[int]] = defaultdict(list)
    for m in result.messages:  # in the order the application saw them
        i = int(m.body)
        sequences[i % keys].append(i)
    assert set(sequences) == set(range(keys))
    for key, seen in sequences.items():
        assert seen == sorted(seen), f"key {key} out of order: {seen}"
        assert sorted(set(seen)) == list(range(key, keys * per_key, keys))
