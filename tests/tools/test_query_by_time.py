"""Searching a topic's messages by time a page at a time (rmq.admin.messages.by_time and
mqadmin queryMsgByTime), against an in-process name server and broker: newest first, every
match counted, no message lost between pages, and exact range edges."""

from __future__ import annotations

import re

from rmq.admin import AdminError
from rmq.admin.messages import by_time
from rmq.client import Message, MessageExt, Producer
from rmq.client.admin import MAX_TIMESTAMP, MQAdmin

from .test_admin import Servers, admin, create_topic, one_line_error, servers

__all__ = ["servers"]  # the fixture, imported for pytest


async def stored(s: Servers, topic: str, count: int) -> list[MessageExt]:
    """Send `count` messages and read them back, oldest first (by store time, queue, offset)."""
    async with Producer("pg_paged", s.ns) as producer:
        for i in range(count):
            await producer.send(Message(topic, f"paged-{i}", tags=f"T{i % 3}"))
    await s.broker.store.wait_dispatched()
    async with MQAdmin(s.ns) as a:
        msgs = (await by_time(a, topic, 0, MAX_TIMESTAMP, size=count)).messages
    return sorted(msgs, key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))


async def test_pages_newest_first_and_count_every_match(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Paged", queues=2)
    msgs = await stored(s, "Paged", 45)
    assert len(msgs) == 45
    async with MQAdmin(s.ns) as a:
        pages = [await by_time(a, "Paged", 0, MAX_TIMESTAMP, page=n, size=20) for n in (1, 2, 3, 4)]
        assert [p.total for p in pages] == [45] * 4 and pages[0].pages == 3
        assert [len(p.messages) for p in pages] == [20, 20, 5, 0]
        assert [(p.first, p.last) for p in pages] == [(1, 20), (21, 40), (41, 45), (0, 0)]
        shown = [m for p in pages for m in p.messages]
        assert sorted(m.msg_id for m in shown) == sorted(m.msg_id for m in msgs)  # none lost, none twice
        times = [m.store_timestamp for m in shown]
        assert times == sorted(times, reverse=True)  # newest first, across queues and pages
        assert pages[0].messages[0].store_timestamp == msgs[-1].store_timestamp
        assert pages[0].summary() == "45 matched, showing 1-20 (newest first, page 1 of 3)"
        assert pages[3].summary() == "45 matched; page 4 is past the last page, 3"

        oldest = await by_time(a, "Paged", 0, MAX_TIMESTAMP, size=10, newest_first=False)
        assert oldest.messages[0].store_timestamp == msgs[0].store_timestamp
        assert [m.store_timestamp for m in oldest.messages] == sorted(m.store_timestamp for m in oldest.messages)

        # a range inside the stored times: exactly the messages stored within it, both ends included
        begin, end = msgs[12].store_timestamp, msgs[30].store_timestamp
        inside = {m.msg_id for m in msgs if begin <= m.store_timestamp <= end}
        ranged = await by_time(a, "Paged", begin, end, size=100)
        assert ranged.total == len(inside) and {m.msg_id for m in ranged.messages} == inside
        assert (await by_time(a, "Paged", end + 10_000, end + 20_000)).total == 0

        for bad in ({"page": 0}, {"size": 0}, {"size": 5000}):
            try:
                await by_time(a, "Paged", 0, MAX_TIMESTAMP, **bad)  # type: ignore[arg-type]
            except AdminError:
                continue
            raise AssertionError(f"{bad} was accepted")

    r = await admin(s, "queryMsgByTime", "-t", "Paged", "-b", "0", "-e", "now", "-p", "2")
    assert r.code == 0, r.err
    assert r.lines[0].endswith(": 45 matched, showing 21-40 (newest first, page 2 of 3)")
    rows = [line.split() for line in r.lines[2:]]
    assert len(rows) == 20 and {row[0] for row in rows} <= {m.msg_id for m in msgs}
    r = await admin(s, "queryMsgByTime", "-t", "Paged", "-b", "0", "-s", "5", "--oldestFirst")
    assert re.search(r": 45 matched, showing 1-5 \(oldest first, page 1 of 9\)$", r.lines[0])
    assert r.lines[2].split()[0] == msgs[0].msg_id
    one_line_error(await admin(s, "queryMsgByTime", "-t", "Paged", "-b", "now", "-e", "0"), "after the end")
    one_line_error(await admin(s, "queryMsgByTime", "-t", "Paged", "-s", "0"), "page size")
