"""mqadmin commands of Apache 4.9.8 that rmq lacked: updateTopicPerm, producer,
exportConfigs, exportMetadata, against an in-process broker."""

from __future__ import annotations

import re
import time

from rmq.client import Message, Producer
from rmq.client.admin import MQAdmin

from .test_admin import CLUSTER, LIMIT, Servers, admin, create_topic, one_line_error, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest


async def test_update_topic_perm(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Perm", queues=2)
    r = await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "4")
    assert r.code == 0, r.err
    assert r.lines[0] == f"update topic perm from 6 to 4 in {s.addr} success."
    assert r.lines[1].startswith("TopicConfig [topicName=Perm, readQueueNums=2, writeQueueNums=2, perm=R--")
    tc = s.broker.topics.get("Perm")
    assert tc is not None and (tc.perm, tc.read_queue_nums, tc.write_queue_nums) == (4, 2, 2)

    async def registered() -> bool:  # the broker registers the change with the name server
        async with MQAdmin(s.ns) as mq_admin:
            return (await mq_admin.topic_route("Perm")).queue_datas[0].perm == 4

    await wait_for(registered)
    r = await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "4")
    assert r.lines == ["new perm equals to the old one!"], r.out

    r = await admin(s, "updateTopicPerm", "-c", CLUSTER, "-t", "Perm", "-p", "6")
    assert r.code == 0, r.err
    assert r.lines == [f"update topic perm from 4 to 6 in {s.addr} success."]
    assert s.broker.topics.get("Perm").perm == 6  # type: ignore[union-attr]

    one_line_error(await admin(s, "updateTopicPerm", "-b", "10.0.0.1:1", "-t", "Perm", "-p", "6"), "not master")
    assert (await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "5")).code != 0  # 2, 4 or 6


async def test_producer(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Made", queues=2)
    async with Producer("pg_more", s.ns) as producer:
        await producer.send(Message("Made", b"x"))
        client_id = producer.instance.client_id

        async def listed() -> bool:
            return any("(pg_more)" in line for line in (await admin(s, "producer", "-b", s.addr)).lines)

        await wait_for(listed)
        r = await admin(s, "producer", "--broker", s.addr)
        assert r.code == 0, r.err
        (line,) = [x for x in r.lines if "(pg_more)" in x]
        match = re.fullmatch(
            rf"producer group \(pg_more\) instance : clientId={re.escape(client_id)},remoteIP=/127\.0\.0\.1:\d+, "
            r"language=PYTHON, version=(\d+), lastUpdateTimestamp=(\d+)",
            line,
        )
        assert match, line
        assert abs(int(match[2]) - time.time() * 1000) < LIMIT * 1000
    one_line_error(await admin(s, "producer", "-b", "127.0.0.1:1"), "127.0.0.1:1")
