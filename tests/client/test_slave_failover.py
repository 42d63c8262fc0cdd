"""Consumers and producers on master/slave groups (one process, real sockets, real HA
replication): consumers follow suggestWhichBrokerId to a slave, keep consuming from the
slave while the master is gone or refuses connections, commit their progress to the master
when it is back; producers never send to a slave."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rmq.broker.controller import BrokerController
from rmq.broker.registration import Registration
from rmq.client import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmq.client.config import ConsumerConfig
from rmq.client.errors import MQConnectError, MQNoRouteError
from rmq.client.instance import ClientInstance
from rmq.client.pull_consumer import BUFFERED_BATCHES
from rmq.client.route import TopicRoute
from rmq.namesrv.server import NamesrvServer
from rmq.remoting import RemotingClient

from ..broker.cluster import loopback_namesrv, start_broker

LIMIT = 20  # seconds: every wait in these tests ends by then (well under the 30 s route poll)

# short waits, but the route poll left at its 30 s: failover must not wait for it
QUICK: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.5,
    "pull_error_delay": 0.2,
    "broker_suspend_max_time": 1.0,
    "consumer_timeout_when_suspend": 5.0,
    "consume_from_where": ConsumeFromWhere.FIRST_OFFSET,
}


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


start = start_broker


async def stop(broker: BrokerController) -> None:
    broker.shutdown()
    await broker.wait_stopped()


async def replicated(master: BrokerController, slave: BrokerController) -> None:
    """Until the slave holds the master's whole CommitLog, dispatched, and its metadata."""
    with trio.fail_after(LIMIT):
        while slave.message_store.max_phy_offset != master.message_store.max_phy_offset:
            await trio.sleep(0.01)
        await slave.store.wait_dispatched()
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()  # topics, groups and offsets now rather than in 10 s


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = LIMIT) -> None:
    with trio.move_on_after(timeout):
        while not condition():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def route_ids(namesrv: NamesrvServer, topic: str, broker_name: str) -> set[int]:
    """Broker ids of `broker_name` in the name server's route of `topic`."""
    route = namesrv.routes.pickup_topic_route(topic)
    if route is None:
        return set()
    for bd in route["brokerDatas"]:
        if bd["brokerName"] == broker_name:
            return {int(k) for k in bd["brokerAddrs"]}
    return set()


async def send(namesrv: NamesrvServer, topic: str, bodies: list[str]) -> None:
    async with Producer("pg-failover", namesrv=namesrv.address) as producer:
        for body in bodies:
            result = await producer.send(Message(topic, body))
            assert result.status.value == "SEND_OK"


def committed(broker: BrokerController, group: str, topic: str) -> int:
    return sum(broker.offsets.offsets_of(group, topic).values())


def bodies(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


# -- following suggestWhichBrokerId ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["push", "pull"])
async def test_consumer_follows_the_suggestion_to_the_slave(tmp_path: Path, namesrv: NamesrvServer, kind: str) -> None:
    """slaveReadEnable: a master sends a consumer far behind the log's end to brokerId 1
    (whichBrokerWhenConsumeSlowly); the consumer pulls from the slave from then on while it
    lags, and its commits still go to the master."""
    topic, group = "SuggestTopic", f"CG-suggest-{kind}"
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv, slaveReadEnable="true")
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1", slaveReadEnable="true")
        await send(namesrv, topic, bodies("s", 240))
        await replicated(master, slave)
        # "in memory" is a percentage of this machine's RAM, more than a test can write:
        # 2 KiB makes all but the last few messages of each queue "on disk"
        master.role.memory_budget = slave.role.memory_budget = 2048
        got: list[str] = []
        if kind == "push":

            async def handler(msg: MessageExt) -> None:
                got.append(msg.body.decode())

            consumer: PushConsumer | PullConsumer = PushConsumer(
                group, namesrv.address, handler=handler, pull_batch_size=4, **QUICK
            )
            consumer.subscribe(topic)
            async with consumer:
                await wait_until(lambda: len(got) >= 240, "240 messages")
        else:
            consumer = PullConsumer(group, namesrv.address, pull_batch_size=4, **QUICK)
            consumer.subscribe(topic)
            async with consumer:
                with trio.fail_after(LIMIT):
                    while len(got) < 240:
                        got.extend(m.body.decode() for m in await consumer.poll(1.0))
        assert sorted(got) == sorted(bodies("s", 240))
        # the master answered the first pull of each queue, the slave most of the rest
        assert 0 < master.stats.get_total < 240
        assert slave.stats.get_total > 120
        assert master.stats.get_total + slave.stats.get_total >= 240
        # progress went to the master (pulls from the slave carry no commit)
        assert committed(master, group, topic) == 240
        await stop(master)
        await stop(slave)


# -- the master goes away -------------------------------------------------------------------


async def test_consumer_keeps_consuming_from_the_slave_and_commits_when_the_master_is_back(
    tmp_path: Path, namesrv: NamesrvServer
) -> None:
    topic, group = "FailoverTopic", "CG-failover"
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        got: list[str] = []
        gate = trio.Event()
        held = 0

        async def handler(msg: MessageExt) -> None:
            nonlocal held
            body = msg.body.decode()
            if body.startswith("b-") and not gate.is_set():
                held += 1
                await gate.wait()
            got.append(body)

        # one message per pull, none pulled while one is held: while the handler waits at
        # the gate, the rest of batch b stays on the brokers. A pull that fails waits 3 s
        # (RocketMQ's default) unless another broker of the group can be asked at once.
        options = {**QUICK, "pull_error_delay": 3.0}
        consumer = PushConsumer(
            group, namesrv.address, handler=handler, pull_batch_size=1, pull_threshold_for_queue=0, **options
        )
        consumer.subscribe(topic)
        async with consumer:
            await send(namesrv, topic, bodies("a", 20))
            await wait_until(lambda: len(got) == 20, "batch a")
            await wait_until(lambda: committed(master, group, topic) == 20, "batch a's commits")

            await send(namesrv, topic, bodies("b", 40))
            await wait_until(lambda: held == 4, "one message of batch b per queue held")
            await replicated(master, slave)
            served_before = slave.stats.get_total
            await stop(master)
            assert route_ids(namesrv, topic, "broker-a") == {1}
            gate.set()
            # the pulls to the master fail, and the consumer goes on from the slave at once,
            # neither after the 30 s route poll nor after the 3 s pull error delay
            await wait_until(lambda: len(got) == 60, "batch b from the slave", timeout=2.5)
            assert slave.stats.get_total - served_before == 36
            # its progress is kept in memory, none of it lost to the failed commits
            await trio.sleep(1.0)  # two commit rounds against a master that is not there
            progress = consumer.offsets.snapshot()
            assert sum(v for mq, v in progress.items() if mq.topic == topic) == 60

            master = await start(nursery, tmp_path / "m", namesrv)
            assert committed(master, group, topic) == 20  # what it had before it stopped
            # seconds, not the 30 s route poll: failed commits refresh the route, and the
            # master's new address counts whichever of the group's topics brought it
            await wait_until(
                lambda: committed(master, group, topic) == 60, "the commits of batch b on the master", timeout=6
            )
            await send(namesrv, topic, bodies("c", 20))
            await wait_until(lambda: len(got) == 80, "batch c")
        assert sorted(got) == sorted(bodies("a", 20) + bodies("b", 40) + bodies("c", 20))
        assert not [body for body, n in Counter(got).items() if n > 1]
        assert committed(master, group, topic) == 80
        await stop(master)
        await stop(slave)


async def test_pull_consumer_moves_to_the_slave_at_once(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """A pull that cannot reach the master is made again at once on the slave, not after
    pull_error_delay (3 s)."""
    topic, group = "PullMoveTopic", "CG-pull-move"
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await send(namesrv, topic, bodies("p", 120))
        await replicated(master, slave)
        consumer = PullConsumer(group, namesrv.address, pull_batch_size=1, **{**QUICK, "pull_error_delay": 3.0})
        consumer.subscribe(topic)
        got: list[str] = []
        async with consumer:
            # the pull tasks stop once poll()'s buffer is full, each holding the answer of
            # the pull it sent ahead (its queue had more): about half of the messages are
            # still to be pulled, and no pull is under way when the master goes
            await wait_until(
                lambda: consumer._buf_recv.statistics().current_buffer_used == BUFFERED_BATCHES, "a full buffer"
            )
            await stop(master)
            start_time = trio.current_time()
            with trio.fail_after(LIMIT):
                while len(got) < 120:
                    got.extend(m.body.decode() for m in await consumer.poll(0.5))
            elapsed = trio.current_time() - start_time
        assert sorted(got) == sorted(bodies("p", 120))
        assert slave.stats.get_total >= 120 - BUFFERED_BATCHES - 2 * 4  # 4 queues
        assert elapsed < 2.5, f"{elapsed:.2f} s"
        await stop(slave)


async def test_new_consumer_reads_its_offsets_from_the_slave(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """With the master gone, a consumer that starts takes its group's offsets from the slave
    (QUERY_CONSUMER_OFFSET), so it resumes there rather than at its first offset."""
    topic, group = "ResumeTopic", "CG-resume"
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await send(namesrv, topic, bodies("a", 30))
        got: list[str] = []

        async def handler(msg: MessageExt) -> None:
            got.append(msg.body.decode())

        consumer = PushConsumer(group, namesrv.address, handler=handler, **QUICK)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(got) == 30, "batch a")
        assert committed(master, group, topic) == 30
        await send(namesrv, topic, bodies("b", 30))
        await replicated(master, slave)  # the slave now has batch b and the group's offsets
        assert committed(slave, group, topic) == 30
        await stop(master)

        got.clear()
        consumer = PushConsumer(group, namesrv.address, handler=handler, **QUICK)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(got) == 30, "batch b from the slave")
            await trio.sleep(0.5)
        assert sorted(got) == sorted(bodies("b", 30))  # consume_from_where=FIRST_OFFSET would give a too
        assert slave.offsets.offsets_of(group, topic) == master.offsets.offsets_of(group, topic)  # nothing committed
        await stop(slave)


async def test_consumer_ahead_of_its_slave_waits_instead_of_spinning(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """A slave asked for an offset it does not have (it lags: here it copied nothing) answers
    PULL_RETRY_IMMEDIATELY at the same offset; the consumer asks again after
    pull_error_delay, not in a loop, and loses no progress."""
    topic, group = "AheadTopic", "CG-ahead"
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        # an HA address where nothing listens: the slave copies metadata, no message
        slave = await start(
            nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1", haMasterAddress="127.0.0.1:1"
        )
        await send(namesrv, topic, bodies("a", 40))
        got: list[str] = []

        async def handler(msg: MessageExt) -> None:
            got.append(msg.body.decode())

        consumer = PushConsumer(group, namesrv.address, handler=handler, **{**QUICK, "pull_error_delay": 0.5})
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(got) == 40, "batch a")
            assert slave.slave_sync is not None
            await slave.slave_sync.sync_all()
            assert slave.topics.get(topic) is not None and slave.message_store.max_phy_offset == 0
            await stop(master)
            stats = slave.message_store._stats
            await wait_until(lambda: stats.get_message_times_total_miss > 0, "pulls on the slave")
            before = stats.get_message_times_total_miss
            await trio.sleep(2.0)
            asked = stats.get_message_times_total_miss - before
            # 4 queues, one pull each per 0.5 s (and the retry topic's long polls)
            assert 4 <= asked <= 40, asked
            progress = consumer.offsets.snapshot()
            assert sum(v for mq, v in progress.items() if mq.topic == topic) == 40
        assert sorted(got) == sorted(bodies("a", 40))
        await stop(slave)


async def test_master_that_refuses_connections_while_still_in_the_route(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """A master that died without its connection to the name server closing stays in the route
    until it expires (120 s). Pulls, offset reads and rebalancing go to the slave at once;
    commits wait for a master that answers."""
    topic, group = "StaleTopic", "CG-stale"
    async with trio.open_nursery() as nursery, RemotingClient() as ns_client:
        master = await start(nursery, tmp_path / "m", namesrv)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await send(namesrv, topic, bodies("a", 30))
        await replicated(master, slave)
        topics = master.topics.wrapper()
        await stop(master)
        # the master "comes back" in the route at an address where nothing listens
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        dead = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        await listeners[0].aclose()
        registration = Registration(
            ns_client,
            (namesrv.address,),
            lambda: ("broker-a", dead, "TestCluster", dead, 0),
            lambda: topics,
            30.0,
        )
        await registration.register_all()
        assert route_ids(namesrv, topic, "broker-a") == {0, 1}

        got: list[str] = []

        async def handler(msg: MessageExt) -> None:
            got.append(msg.body.decode())

        consumer = PushConsumer(group, namesrv.address, handler=handler, **QUICK)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(got) == 30, "batch a from the slave")
            assert consumer.instance.master_addr("broker-a") == dead
            await trio.sleep(1.0)
            progress = consumer.offsets.snapshot()
            assert sum(v for mq, v in progress.items() if mq.topic == topic) == 30
        assert sorted(got) == sorted(bodies("a", 30))
        assert slave.stats.get_total >= 30
        assert committed(slave, group, topic) == 0  # commits never go to a slave
        await stop(slave)


# -- producers ------------------------------------------------------------------------------


async def test_producer_never_sends_to_a_slave(tmp_path: Path, namesrv: NamesrvServer) -> None:
    topic = "ProduceTopic"
    async with trio.open_nursery() as nursery:
        master_a = await start(nursery, tmp_path / "ma", namesrv)
        slave_a = await start(nursery, tmp_path / "sa", namesrv, brokerRole="SLAVE", brokerId="1")
        master_b = await start(nursery, tmp_path / "mb", namesrv, brokerName="broker-b")
        for broker in (master_a, master_b):
            broker.topics.create_if_absent(topic, 4, 6)
        await wait_until(
            lambda: (
                {bd["brokerName"] for bd in (namesrv.routes.pickup_topic_route(topic) or {}).get("brokerDatas", [])}
                == {"broker-a", "broker-b"}
            ),
            "both groups in the route",
        )
        async with Producer("pg-slave", namesrv=namesrv.address, poll_name_server_interval=1.0) as producer:
            first = [await producer.send(Message(topic, f"one-{i}")) for i in range(16)]
            assert {r.message_queue.broker_name for r in first} == {"broker-a", "broker-b"}
            await replicated(master_a, slave_a)
            end = slave_a.message_store.max_phy_offset
            await stop(master_a)
            assert route_ids(namesrv, topic, "broker-a") == {1}
            # the group without a master has no publish queues: everything goes to broker-b
            then = [await producer.send(Message(topic, f"two-{i}")) for i in range(16)]
            assert {r.message_queue.broker_name for r in then} == {"broker-b"}
            assert all(r.status.value == "SEND_OK" for r in then)
            await trio.sleep(1.5)  # a route poll: its publish queues are broker-b's only
            assert {mq.broker_name for mq in await producer.fetch_publish_queues(topic)} == {"broker-b"}
            await stop(master_b)
            # only a slave left: until the next route poll the dead master is tried, never the slave
            with pytest.raises((MQConnectError, MQNoRouteError)) as info:
                await producer.send(Message(topic, "three"))
            if isinstance(info.value, MQConnectError):
                assert info.value.address == master_b.address
            # then there is no queue to send to
            await trio.sleep(1.5)
            with pytest.raises(MQNoRouteError):
                await producer.send(Message(topic, "four"))
        assert slave_a.message_store.max_phy_offset == end
        await stop(slave_a)


# -- where reads go (no broker needed) ------------------------------------------------------


async def test_read_addresses_prefer_the_suggestion_then_the_master_then_a_slave(
    autojump_clock: trio.testing.MockClock,
) -> None:
    instance = ClientInstance(ConsumerConfig.build("127.0.0.1:9876", {}))
    route = TopicRoute.from_json(
        {
            "brokerDatas": [
                {"brokerAddrs": {"0": "h:10", "1": "h:11", "2": "h:12"}, "brokerName": "a", "cluster": "C"},
                {"brokerAddrs": {"1": "h:21"}, "brokerName": "b", "cluster": "C"},
            ],
            "queueDatas": [
                {"brokerName": "a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
                {"brokerName": "b", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
            ],
        }
    )
    instance.store_route("T", route)
    # a group without a master publishes nothing, but is read from its slave
    assert [mq.broker_name for mq in route.publish_queues("T")] == ["a", "a"]
    assert MessageQueue("T", "b", 1) in route.subscribe_queues("T")
    assert instance.read_addr("b") == "h:21" and instance.master_addr("b") is None
    assert instance.read_addr("a") == "h:10"
    assert instance.read_addr("a", 2) == "h:12"
    assert instance.read_addr("a", 5) == "h:10"  # an id the group does not have: its master
    assert instance.read_addr("nope") is None
    instance.unreachable("h:10")
    assert instance.read_addr("a") == "h:11"  # the master refused: a slave
    assert instance.read_addr("a", 2) == "h:12"
    instance.unreachable("h:21")
    assert instance.read_addr("b") == "h:21"  # nothing else to try
    await trio.sleep(5.1)  # UNREACHABLE_FOR
    assert instance.read_addr("a") == "h:10"
    # the route fetched last says where a group's brokers are, whichever topic it is of
    moved = TopicRoute.from_json(
        {
            "brokerDatas": [{"brokerAddrs": {"0": "h:99", "1": "h:11"}, "brokerName": "a", "cluster": "C"}],
            "queueDatas": [{"brokerName": "a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}],
        }
    )
    instance.store_route("U", moved)
    assert instance.master_addr("a") == "h:99"
    instance.store_route("T", route)
    assert instance.master_addr("a") == "h:10"
    instance.store_route("U", moved)
    assert instance.master_addr("a") == "h:99"
