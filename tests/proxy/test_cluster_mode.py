"""The official 5.x client through a cluster-mode proxy in front of two broker groups:
every kind of message sent sync and async, a PushConsumer over 10,000 messages, the DLQ
after the group's retries, and the 4.x, C++ and 5.x clients on one topic."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, Producer, PushConsumer
from rmq.protocol import properties as P
from tests.interop.cpp_client import produce, push_consume, requires_cpp_client, run_scenario, start_scenario

from .conftest import TwoGroups, run_client

BROKERS = {"broker-a", "broker-b"}


async def test_every_kind_sync_and_async(two_groups: TwoGroups) -> None:
    """Normal, FIFO, delay and transactional messages, sent sync and async (no async
    transactional send in the client), all received once, over both groups; a message
    group keeps to one queue, in send order for sync sends; a delayed message not before
    its time."""
    topic, n, delay = "KindsTopic", 4, 3
    await two_groups.create_topic(topic)
    endpoint = two_groups.endpoint
    sent = await run_client(endpoint, "kinds_sync", topic, "KindsGroup", str(n), str(delay))
    sent += await run_client(endpoint, "kinds_async", topic, "KindsGroup", str(n), str(delay))
    assert Counter(line["kind"] for line in sent) == {"normal": 2 * n, "fifo": 2 * n, "delay": 2 * n, "tx": n}
    got = await run_client(endpoint, "receive", topic, "KindsGroup", str(len(sent)), "30")
    messages, summary = got[:-1], got[-1]
    assert summary == {"received": len(sent)}
    by_id = {m["id"]: m for m in messages}
    assert len(by_id) == len(sent) and {line["sent"] for line in sent} == set(by_id)
    for line in sent:
        received = by_id[line["sent"]]
        assert received["body"] == line["body"] and received["tag"] == line["kind"]
        if line["kind"] == "delay":
            assert received["due"] == line["due"] and received["at"] >= line["due"], (line, received)
    stored = two_groups.stored(topic)
    assert {broker for broker, _, _ in stored} == BROKERS
    queues = defaultdict(set)
    order = defaultdict(list)
    for broker, queue_id, msg in stored:
        group = msg.properties.get(P.SHARDING_KEY)
        if group is not None:
            queues[group].add((broker, queue_id))
            order[group].append(int(msg.body.decode().rsplit("-", 1)[1]))
    assert set(queues) == {"sync-g0", "sync-g1", "async-g0", "async-g1"}
    assert all(len(where) == 1 for where in queues.values()), queues
    assert order["sync-g0"] == sorted(order["sync-g0"]) and order["sync-g1"] == sorted(order["sync-g1"])


@pytest.mark.slow
async def test_push_consumer_10000(two_groups: TwoGroups) -> None:
    """A PushConsumer through the proxy consumes 10,000 messages, sent meanwhile by our
    4.x producer straight to both brokers: none lost (distinct bodies counted)."""
    topic, n = "PushTopic", 10_000
    await two_groups.create_topic(topic)
    lines: list[dict[str, object]] = []

    async def consume() -> None:
        lines.extend(await run_client(two_groups.endpoint, "push", topic, "PushGroup", str(n), "45", timeout=58))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with Producer("PushProducer", [two_groups.namesrv_addr]) as producer:
            with trio.fail_after(30):
                for i in range(n):
                    await producer.send(Message(topic, f"p-{i}".encode()))
    _, summary = lines
    assert summary["distinct"] == n and summary["unexpected"] == 0, summary
    assert isinstance(summary["total"], int) and summary["total"] >= n
    stored = two_groups.stored(topic)
    assert len(stored) == n and {broker for broker, _, _ in stored} == BROKERS


async def test_unacked_message_goes_to_the_dlq(two_groups: TwoGroups) -> None:
    """Never acked, a message comes back until the group's retryMaxTimes (2) are used up,
    then lands in %DLQ%<group> and is not received again."""
    topic, group = "DlqTopic", "DlqGroup"
    await two_groups.create_topic(topic)
    await two_groups.create_group(group, retryMaxTimes=2)
    [sent] = await run_client(two_groups.endpoint, "send", topic, group, "1")
    deliveries = await run_client(two_groups.endpoint, "never_ack", topic, group, "3", "30", timeout=50)
    assert [(d["id"], d["attempt"]) for d in deliveries] == [(sent["sent"], a) for a in (1, 2, 3)]
    with trio.fail_after(15):
        while not (dead := two_groups.stored(f"%DLQ%{group}")):
            await trio.sleep(0.2)
    [(_, _, msg)] = dead
    assert msg.properties[P.UNIQ_KEY] == sent["sent"] and msg.body == b"body-0"


@pytest.mark.interop
@requires_cpp_client
async def test_4x_cpp_and_5x_clients_on_one_topic(two_groups: TwoGroups) -> None:
    """Our 4.x producer, the C++ producer and the 5.x producer send to one topic; our 4.x
    PushConsumer, the C++ PushConsumer and the 5.x SimpleConsumer each receive all of it."""
    topic, n = "MixTopic", 10
    await two_groups.create_topic(topic)
    ns = two_groups.namesrv_addr
    bodies = {f"v4-{i}" for i in range(n)} | {f"cpp-{i}" for i in range(n)} | {f"body-{i}" for i in range(n)}
    seen4: list[str] = []
    all4 = trio.Event()

    async def handle(msg: Message) -> None:
        seen4.append(msg.body.decode())
        if set(seen4) >= bodies:
            all4.set()

    consumer = PushConsumer("Mix4", [ns], handler=handle, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic)
    cpp_consumer = push_consume(ns, topic, 3 * n, group="MixCpp", linger=1.0, time_limit=50)
    async with consumer, start_scenario(cpp_consumer) as cpp:
        await cpp.wait_for("started")
        sent4 = []
        async with Producer("Mix4Producer", [ns]) as producer:
            for i in range(n):
                sent4.append((await producer.send(Message(topic, f"v4-{i}".encode()))).msg_id)
        (await run_scenario(produce(ns, topic, n, body="cpp-{i}"))).check()
        sent5 = await run_client(two_groups.endpoint, "send", topic, "Mix5", str(n))
        got5 = await run_client(two_groups.endpoint, "receive", topic, "Mix5", str(3 * n), "30")
        with trio.fail_after(30):
            await all4.wait()
        cpp_result = (await cpp.wait()).check()
    assert got5[-1] == {"received": 3 * n}
    assert {m["body"] for m in got5[:-1]} == bodies
    ids5 = {m["body"]: m["id"] for m in got5[:-1]}
    assert {ids5[f"v4-{i}"] for i in range(n)} == set(sent4)  # the 4.x message id is the 5.x one
    assert {ids5[f"body-{i}"] for i in range(n)} == {line["sent"] for line in sent5}
    assert set(seen4) == bodies
    assert {m.body.decode() for m in cpp_result.messages} == bodies
    stored = two_groups.stored(topic)
    assert len(stored) == 3 * n and {broker for broker, _, _ in stored} == BROKERS
