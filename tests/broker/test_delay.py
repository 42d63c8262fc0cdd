"""Delay levels end to end: SCHEDULE_TOPIC_XXXX, delivery times, delayOffset.json, restarts, retries.

Virtual time (autojump_clock) drives both Trio's clock and the broker's wall clock.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rmq.broker.schedule import DELIVERED_FROM
from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.message import MessageExt, iter_records, parse_offset_msg_id

from .cluster import Cluster
from .test_send_pull import pull_ext, send_ext

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


async def send_delayed(
    cluster: Cluster, body: bytes, level: int, topic: str = "Late", queue_id: int = 1, **props: str
) -> dict[str, str]:
    r = await cluster.call(
        RequestCode.SEND_MESSAGE, send_ext(topic=topic, queue_id=queue_id, props={"DELAY": str(level), **props}), body
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r.ext_fields


async def pull_all(cluster: Cluster, topic: str, queue_id: int) -> list[MessageExt]:
    await cluster.broker.store.wait_dispatched()
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext(topic, queue_id, 0))
    return list(iter_records(r.body)) if r.code == ResponseCode.SUCCESS else []


def queued(cluster: Cluster, topic: str, queue_id: int) -> int:
    return cluster.broker.message_store.get_max_offset_in_queue(topic, queue_id)


async def test_delivered_at_its_level_not_before(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    sent_at = cluster.broker.clock_ms()
    await send_delayed(cluster, b"five seconds", 2, UNIQ_KEY="U-5", TAGS="TagD")
    await cluster.broker.store.wait_dispatched()
    # parked in queue level-1 with the delivery time as tags code
    ((_, phy, _, deliver_at),) = cluster.broker.message_store.read_consume_queue(SCHEDULE, 1, 0, 8)
    parked = cluster.broker.message_store.look_message_by_offset(phy)
    assert parked is not None and parked.topic == SCHEDULE and parked.queue_id == 1
    assert deliver_at == parked.store_timestamp + 5000
    assert parked.properties["REAL_TOPIC"] == "Late" and parked.properties["REAL_QID"] == "1"
    await trio.sleep(4.9)
    assert queued(cluster, "Late", 1) == 0
    await trio.sleep(0.2)
    (m,) = await pull_all(cluster, "Late", 1)
    assert m.body == b"five seconds" and m.topic == "Late" and m.queue_id == 1
    assert m.store_timestamp - sent_at >= 5000
    assert "DELAY" not in m.properties
    assert m.properties["UNIQ_KEY"] == "U-5" and m.properties["TAGS"] == "TagD"
    assert m.properties[DELIVERED_FROM] == "2:0"


async def test_level_is_clamped_and_levels_are_independent(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send_delayed(cluster, b"two hours", 99, queue_id=0)
    for i in range(5):
        await send_delayed(cluster, f"one-{i}".encode(), 1, queue_id=0)
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, SCHEDULE, 17) == 1 and queued(cluster, SCHEDULE, 0) == 5
    await trio.sleep(1.5)
    assert [m.body for m in await pull_all(cluster, "Late", 0)] == [f"one-{i}".encode() for i in range(5)]
    (parked,) = cluster.broker.message_store.read_consume_queue(SCHEDULE, 17, 0, 1)
    assert parked[3] - cluster.broker.clock_ms() > 7_190_000  # due in two hours


async def test_delay_offset_file_and_admin_body(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    for _ in range(3):
        await send_delayed(cluster, b"x", 3)
    await trio.sleep(12)
    r = await cluster.call(RequestCode.GET_ALL_DELAY_OFFSET)
    assert json_body.loads(r.body)["offsetTable"] == {3: 3}
    await cluster.stop()  # written at shutdown (the periodic write races autojump in a thread)
    text = (cluster.store / "config" / "delayOffset.json").read_text()
    assert '"offsetTable":{3:3}' in text  # fastjson's unquoted level keys
    state = json_body.loads(text)
    assert state["offsetTable"] == {3: 3} and state["commitLogOffset"] == cluster.broker.message_store.max_phy_offset
    await cluster.start()


async def test_survives_a_restart_without_loss_or_duplicates(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    for i in range(4):
        await send_delayed(cluster, f"early-{i}".encode(), 1)  # 1 s
    for i in range(4):
        await send_delayed(cluster, f"late-{i}".encode(), 10)  # 6 min: a restart takes minutes of virtual time
    await trio.sleep(2)
    assert len(await pull_all(cluster, "Late", 1)) == 4
    await cluster.restart()  # takes virtual minutes: late ones may come due meanwhile
    await trio.sleep(1)
    bodies = [m.body for m in await pull_all(cluster, "Late", 1)]
    assert len(bodies) == len(set(bodies)) >= 4  # the early ones were not delivered again
    await trio.sleep(360)
    bodies = [m.body for m in await pull_all(cluster, "Late", 1)]
    assert bodies == [f"early-{i}".encode() for i in range(4)] + [f"late-{i}".encode() for i in range(4)]


async def test_deliveries_the_file_missed_are_not_repeated(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A crash after re-puts but before delayOffset.json was written: the markers count them."""
    path = cluster.store / "config" / "delayOffset.json"
    # as written before anything was delayed
    stale = b'{"commitLogOffset":%d,"offsetTable":{}}' % cluster.broker.message_store.max_phy_offset
    for i in range(3):
        await send_delayed(cluster, f"m{i}".encode(), 1)
    await trio.sleep(3)
    assert queued(cluster, "Late", 1) == 3
    await cluster.stop()
    path.write_bytes(stale)
    (cluster.store / "config" / "delayOffset.json.bak").write_bytes(stale)
    await cluster.start()
    assert cluster.broker.schedule.offsets[1] == 3
    await trio.sleep(3)
    assert queued(cluster, "Late", 1) == 3


async def test_a_file_from_a_java_broker_is_read(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send_delayed(cluster, b"a", 10)
    await send_delayed(cluster, b"b", 10)
    await cluster.stop()
    before = [b"a", b"b"][: cluster.broker.schedule.offsets.get(10, 0)]  # a stop takes virtual minutes
    java = '{\n\t"offsetTable":{10:1\n\t}\n}'  # pretty-printed, no watermark: the first was delivered
    (cluster.store / "config" / "delayOffset.json").write_text(java)
    await cluster.start()
    assert cluster.broker.schedule.offsets.get(10) in (1, 2)
    await trio.sleep(360)
    assert [m.body for m in await pull_all(cluster, "Late", 1)] == [*before, b"b"]


async def test_retries_go_through_delay_levels(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Orders", props={"UNIQ_KEY": "U"}), b"pay")
    _, _, phy = parse_offset_msg_id(r.ext_fields["msgId"])
    await cluster.broker.store.wait_dispatched()
    waits = []
    for reconsume in range(3):  # levels 3, 4, 5: 10 s, 30 s, 1 min
        back = await cluster.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG", "offset": phy, "delayLevel": 0})
        assert back.code == ResponseCode.SUCCESS, back.remark
        await cluster.broker.store.wait_dispatched()
        assert queued(cluster, SCHEDULE, 2 + reconsume) == 1
        start = trio.current_time()
        while queued(cluster, "%RETRY%CG", 0) == reconsume:
            await trio.sleep(0.1)
        waits.append(round(trio.current_time() - start))
        (latest,) = (await pull_all(cluster, "%RETRY%CG", 0))[-1:]
        assert latest.reconsume_times == reconsume + 1 and latest.properties["RETRY_TOPIC"] == "Orders"
        assert "DELAY" not in latest.properties
        phy = latest.commitlog_offset
    assert waits == [10, 30, 60]
    # an explicit level wins over 3 + reconsumeTimes
    back = await cluster.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG", "offset": phy, "delayLevel": 1})
    assert back.code == ResponseCode.SUCCESS
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, SCHEDULE, 0) == 1


async def test_a_delayed_dead_letter_is_not_delayed(cluster: Cluster) -> None:
    await cluster.call(RequestCode.HEART_BEAT, body=b'{"clientID":"c","consumerDataSet":[{"groupName":"DG"}]}')
    r = await cluster.call(
        RequestCode.SEND_MESSAGE, send_ext(topic="%RETRY%DG", reconsume_times=16, props={"DELAY": "3"}), b"x"
    )
    assert r.code == 0, r.remark
    await cluster.broker.store.wait_dispatched()
    (m,) = await pull_all(cluster, "%DLQ%DG", 0)
    assert "DELAY" not in m.properties


@pytest.mark.parametrize("broker_props", [{"messageDelayLevel": "1s 2s"}])
async def test_configured_levels(
    cluster: Cluster, autojump_clock: trio.testing.MockClock, broker_props: dict[str, Any]
) -> None:
    await send_delayed(cluster, b"clamped to 2 s", 18)
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, SCHEDULE, 1) == 1
    await trio.sleep(1.9)
    assert queued(cluster, "Late", 1) == 0
    await trio.sleep(0.2)
    assert queued(cluster, "Late", 1) == 1
