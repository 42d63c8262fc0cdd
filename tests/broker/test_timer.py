"""Timer messages end to end: every way to name a time, the limit, ordering, restarts, rolling.

A restart can take hours of virtual time under autojump_clock: the clock jumps whenever
every task waits, also while an fsync runs in a worker thread, and on a loaded machine
that adds up (42 h was seen). So what must still wait after a restart is due a year
later (the module raises timerMaxDelaySec to allow it), and the test jumps there.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from rmq.broker import timer
from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol.message import Message, encode_batch_body

from .cluster import Cluster
from .test_delay import pull_all, queued
from .test_send_pull import send_ext

TIMER = "rmq_sys_wheel_timer"
LATE_MS = 365 * 86_400_000  # far beyond what any restart can take


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"timerMaxDelaySec": str(2 * LATE_MS // 1000)}


async def send_timed(cluster: Cluster, body: bytes, props: dict[str, str] | None = None, **more: str) -> int:
    """Send to Timed queue 2 with `props` and `more` as properties."""
    r = await cluster.call(
        RequestCode.SEND_MESSAGE, send_ext(topic="Timed", queue_id=2, props={**(props or {}), **more}), body
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r.code


def bodies_in(messages: list) -> list[bytes]:  # type: ignore[type-arg]
    return [m.body for m in messages]


@pytest.mark.parametrize(
    ("key", "value", "due_in_ms"),
    [
        ("TIMER_DELIVER_MS", "{now+3000}", 3000),
        ("__STARTDELIVERTIME", "{now+3000}", 3000),
        ("TIMER_DELAY_SEC", "3", 3000),
        ("TIMER_DELAY_MS", "2500", 2500),
    ],
)
async def test_each_way_to_name_a_time(
    cluster: Cluster, autojump_clock: trio.testing.MockClock, key: str, value: str, due_in_ms: int
) -> None:
    now = cluster.broker.clock_ms()
    await send_timed(cluster, b"tick", {key: value.format(**{"now+3000": now + 3000}), "UNIQ_KEY": "T1"})
    await cluster.broker.store.wait_dispatched()
    assert queued(cluster, TIMER, 0) == 1
    await trio.sleep((due_in_ms - 100) / 1000)
    assert queued(cluster, "Timed", 2) == 0
    await trio.sleep(0.2)
    (m,) = await pull_all(cluster, "Timed", 2)
    assert m.body == b"tick" and m.topic == "Timed" and m.queue_id == 2
    assert m.store_timestamp - now >= due_in_ms - 1
    assert m.properties["UNIQ_KEY"] == "T1" and "TIMER_OUT_MS" not in m.properties
    assert m.properties[timer.DELIVERED_FROM] == "0"


async def test_earliest_first_whatever_the_order_sent(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    now = cluster.broker.clock_ms()
    for name, at in (("c", 9000), ("a", 1000), ("d", 12000), ("b", 4000)):
        await send_timed(cluster, name.encode(), TIMER_DELIVER_MS=str(now + at))
    await trio.sleep(5)
    assert bodies_in(await pull_all(cluster, "Timed", 2)) == [b"a", b"b"]
    await trio.sleep(8)
    assert bodies_in(await pull_all(cluster, "Timed", 2)) == [b"a", b"b", b"c", b"d"]


async def test_a_past_time_is_delivered_at_once(cluster: Cluster) -> None:
    await send_timed(cluster, b"late already", TIMER_DELIVER_MS=str(cluster.broker.clock_ms() - 1000))
    assert bodies_in(await pull_all(cluster, "Timed", 2)) == [b"late already"]
    assert queued(cluster, TIMER, 0) == 0


@pytest.mark.parametrize("broker_props", [{}])  # the default limit, 3 days
async def test_limits(cluster: Cluster, broker_props: dict[str, str]) -> None:
    now = cluster.broker.clock_ms()
    r = await cluster.call(
        RequestCode.SEND_MESSAGE, send_ext(topic="Timed", props={"TIMER_DELIVER_MS": str(now + 4 * 86_400_000)}), b"x"
    )
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    assert "timerMaxDelaySec=259200" in (r.remark or "")
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Timed", props={"TIMER_DELAY_SEC": "soon"}), b"x")
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "TIMER_DELAY_SEC" in (r.remark or "")
    batch = encode_batch_body([Message("Timed", b"b", 0, {"TIMER_DELAY_SEC": "5"})])
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Timed", batch=True), batch)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic=TIMER), b"x")
    assert r.code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("broker_props", [{"timerWheelEnable": "false"}])
async def test_disabled_timers_are_ordinary_messages(cluster: Cluster, broker_props: dict[str, str]) -> None:
    await send_timed(cluster, b"now", TIMER_DELAY_SEC="600")
    (m,) = await pull_all(cluster, "Timed", 2)
    assert m.properties["TIMER_DELAY_SEC"] == "600"


async def test_the_timer_wins_over_a_delay_level(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send_timed(cluster, b"both", TIMER_DELAY_MS="500", DELAY="5")
    await trio.sleep(0.6)
    (m,) = await pull_all(cluster, "Timed", 2)
    assert "DELAY" not in m.properties


async def test_survives_a_restart_without_loss_or_duplicates(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    now = cluster.broker.clock_ms()
    for i in range(3):
        await send_timed(cluster, f"late-{i}".encode(), TIMER_DELIVER_MS=str(now + LATE_MS + i))
        await send_timed(cluster, f"soon-{i}".encode(), TIMER_DELIVER_MS=str(now + 1000 + i))
    await trio.sleep(2)
    assert bodies_in(await pull_all(cluster, "Timed", 2)) == [b"soon-0", b"soon-1", b"soon-2"]
    await cluster.restart()
    assert sorted(cluster.broker.timers.pending) == [0, 2, 4]  # the late ones, rebuilt from the queue
    assert cluster.broker.timers.low == 0
    autojump_clock.jump(LATE_MS / 1000)
    await trio.sleep(1)
    got = bodies_in(await pull_all(cluster, "Timed", 2))
    assert got == [b"soon-0", b"soon-1", b"soon-2", b"late-0", b"late-1", b"late-2"]
    await cluster.restart()
    await trio.sleep(10)
    assert queued(cluster, "Timed", 2) == 6


async def test_deliveries_the_file_missed_are_not_repeated(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    path = cluster.store / "config" / "timerProgress.json"
    stale = b'{"commitLogOffset":%d,"done":[],"offset":0}' % cluster.broker.message_store.max_phy_offset
    now = cluster.broker.clock_ms()
    await send_timed(cluster, b"far", TIMER_DELIVER_MS=str(now + LATE_MS))
    for i in range(3):
        await send_timed(cluster, f"m{i}".encode(), TIMER_DELIVER_MS=str(now + 500))
    await trio.sleep(1)
    assert queued(cluster, "Timed", 2) == 3
    await cluster.stop()
    path.write_bytes(stale)  # as if the process died before writing its progress
    path.with_name(path.name + ".bak").write_bytes(stale)
    await cluster.start()
    assert sorted(cluster.broker.timers.pending) == [0]
    await trio.sleep(2)
    assert queued(cluster, "Timed", 2) == 3


async def test_a_far_timer_is_rolled_forward(
    cluster: Cluster, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timer, "ROLL_THRESHOLD", 4)
    now = cluster.broker.clock_ms()
    await send_timed(cluster, b"far", TIMER_DELIVER_MS=str(now + LATE_MS))
    for i in range(10):
        await send_timed(cluster, f"n{i}".encode(), TIMER_DELIVER_MS=str(now + 1000 + i))
    await trio.sleep(2)
    timers = cluster.broker.timers
    assert timers.rolled == 1 and timers.low > 0  # the far one moved to the end of the queue
    await cluster.restart()
    assert len(cluster.broker.timers.pending) == 1
    autojump_clock.jump(LATE_MS / 1000)
    await trio.sleep(1)
    got = bodies_in(await pull_all(cluster, "Timed", 2))
    assert got.count(b"far") == 1 and len(got) == 11
