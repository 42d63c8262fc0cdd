"""The official C++ client (PyPI rocketmq 0.4.4) against our name server and broker.

Real sockets on 127.0.0.1, the client in a subprocess per scenario (tests/interop).
"""

from __future__ import annotations

from collections import Counter

import pytest
import trio

from rmq.protocol import RequestCode, ResponseCode
from tests.interop.cpp_client import (
    MessageSpec,
    make_messages,
    produce,
    push_consume,
    requires_cpp_client,
    run_scenario,
    start_scenario,
)

from .cluster import Cluster

pytestmark = [pytest.mark.interop, requires_cpp_client]

QUEUES = 4


async def create_topic(cluster: Cluster, topic: str, queues: int = QUEUES) -> None:
    """Create the topic up front: a C++ consumer of an unknown topic waits for its next route refresh."""
    response = await cluster.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6},
    )
    assert response.code == ResponseCode.SUCCESS, response.remark


@pytest.mark.slow
async def test_every_send_mode_then_push_consume_1000(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    topic = "TopicCppE2E"
    await create_topic(cluster, topic)

    specs = {
        "sync": produce(
            ns, topic, 250, method="sync", keys="SYNC-{i}", tags="TagA", body="sync-{i}", properties={"userKey": "u{i}"}
        ),
        "oneway": produce(ns, topic, 250, method="oneway", keys="ONEWAY-{i}", tags="TagB", body="oneway-{i}"),
        "batch": produce(
            ns, topic, 250, method="batch", batch_size=50, keys="BATCH-{i}", tags="TagC", body="batch-{i}"
        ),
        "orderly": produce(
            ns, topic, 250, method="orderly", sharding_key=3, keys="ORDER-{i}", tags="TagD", body="order-{i}"
        ),
    }
    for method, spec in specs.items():
        result = (await run_scenario(spec)).check()
        if method in ("sync", "orderly"):
            assert [s.status for s in result.sends] == ["OK"] * 250, method
        if method == "orderly":
            assert {s.queue_index for s in result.sends} == {3 % QUEUES}

    consumed = (
        await run_scenario(
            push_consume(ns, topic, 1000, group="CG_cpp_e2e", linger=2.0, property_keys=("userKey",), time_limit=60)
        )
    ).check()
    keys = Counter(m.keys for m in consumed.messages)
    assert sum(keys.values()) == 1000, "lost or duplicated messages"
    assert set(keys.values()) == {1}
    expected = {f"{prefix}-{i}" for prefix in ("SYNC", "ONEWAY", "BATCH", "ORDER") for i in range(250)}
    assert set(keys) == expected
    tags = {"SYNC": "TagA", "ONEWAY": "TagB", "BATCH": "TagC", "ORDER": "TagD"}
    bodies = {"SYNC": "sync", "ONEWAY": "oneway", "BATCH": "batch", "ORDER": "order"}
    for m in consumed.messages:
        prefix, i = m.keys.split("-")
        assert m.tags == tags[prefix]
        assert m.body == f"{bodies[prefix]}-{i}".encode()
        assert m.topic == topic
        if prefix == "SYNC":
            assert m.properties.get("userKey") == f"u{i}"
    # the orderly messages kept their order within their queue
    orderly = [int(m.keys.split("-")[1]) for m in consumed.messages if m.keys.startswith("ORDER-")]
    by_offset = sorted(
        (m.queue_offset, int(m.keys.split("-")[1])) for m in consumed.messages if m.keys.startswith("ORDER-")
    )
    assert [i for _, i in by_offset] == sorted(orderly)


@pytest.mark.slow
async def test_two_consumers_split_queues_and_one_takes_over(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    topic = "TopicCppSplit"
    group = "CG_cpp_split"
    await create_topic(cluster, topic)

    def one_per_queue(tag: str) -> tuple[MessageSpec, ...]:
        # sharding key i selects queue i % QUEUES: four messages in every queue
        return make_messages(4 * QUEUES, keys=f"{tag}-{{i}}", body=f"{tag}-{{i}}", sharding_key=lambda i: i % QUEUES)

    async with start_scenario(push_consume(ns, topic, 0, group=group, time_limit=45)) as a:
        await a.wait_for("started")
        async with start_scenario(push_consume(ns, topic, 0, group=group, time_limit=12)) as b:
            await b.wait_for("started")
            await trio.sleep(3)  # both rebalanced (NOTIFY_CONSUMER_IDS_CHANGED makes it immediate)
            (await run_scenario(produce(ns, topic, messages=one_per_queue("ROUND1"), method="orderly"))).check()
            result_b = await b.wait()
        # b's time is up: it shut down, unregistered, and a was told to take over
        await trio.sleep(3)
        (await run_scenario(produce(ns, topic, messages=one_per_queue("ROUND2"), method="orderly"))).check()
        with trio.move_on_after(20):
            while (
                sum(1 for e in a.events if e.get("event") == "message" and e.get("keys", "").startswith("ROUND2"))
                < 4 * QUEUES
            ):
                await trio.sleep(0.2)
        a.kill()
    result_a = await a.wait()

    round1_a = {m.queue_id for m in result_a.deliveries if m.keys.startswith("ROUND1")}
    round1_b = {m.queue_id for m in result_b.deliveries if m.keys.startswith("ROUND1")}
    assert round1_a and round1_b, (round1_a, round1_b)
    assert round1_a.isdisjoint(round1_b)
    assert round1_a | round1_b == set(range(QUEUES))
    round1 = [m.keys for m in result_a.deliveries + result_b.deliveries if m.keys.startswith("ROUND1")]
    assert sorted(round1) == sorted(f"ROUND1-{i}" for i in range(4 * QUEUES))
    round2 = [m for m in result_a.deliveries if m.keys.startswith("ROUND2")]
    assert {m.queue_id for m in round2} == set(range(QUEUES))
    assert len(round2) == 4 * QUEUES


@pytest.mark.slow
async def test_restarted_consumer_resumes_from_committed_offset(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    topic = "TopicCppResume"
    group = "CG_cpp_resume"
    await create_topic(cluster, topic)

    (await run_scenario(produce(ns, topic, 20, keys="FIRST-{i}"))).check()
    first = (await run_scenario(push_consume(ns, topic, 20, group=group, linger=1.0))).check()
    assert sorted(m.keys for m in first.messages) == sorted(f"FIRST-{i}" for i in range(20))

    (await run_scenario(produce(ns, topic, 20, keys="SECOND-{i}"))).check()
    second = (await run_scenario(push_consume(ns, topic, 20, group=group, linger=2.0))).check()
    assert sorted(m.keys for m in second.messages) == sorted(f"SECOND-{i}" for i in range(20))
