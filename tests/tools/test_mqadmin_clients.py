"""mqadmin commands about live clients (consumerStatus, producerConnection,
brokerConsumeStats, getConsumerConfig, cloneGroupOffset, skipAccumulatedMessage,
queryMsgTraceById) with a real producer and push consumer on an in-process broker."""

from __future__ import annotations

import re

import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from rmq.client.admin import MQAdmin

from .test_admin import CLUSTER, FAST, LIMIT, Servers, admin, create_topic, one_line_error, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest


async def test_clients_in_the_loop(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Live", queues=4)
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer("cg_live", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    consumer.subscribe("Live", "*")
    async with Producer("pg_live", s.ns) as producer, consumer:
        for i in range(8):
            await producer.send(Message("Live", f"m{i}", tags="T"))
        with trio.fail_after(LIMIT):
            while len(got) < 8:
                await trio.sleep(0.05)
        client_id = consumer.instance.client_id

        r = await admin(s, "producerConnection", "-g", "pg_live", "-t", "Live")
        assert r.code == 0, r.err
        assert re.fullmatch(rf"0001  {re.escape(producer.instance.client_id)}\s+\S+\s+PYTHON\s+V4_9_8", r.lines[0])

        r = await admin(s, "consumerStatus", "-g", "cg_live")
        assert r.code == 0, r.err
        assert r.lines[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfo"]
        assert r.lines[1].split()[:2] == ["1", client_id] and r.lines[1].endswith("5 queues")  # and %RETRY%cg_live
        assert "Same subscription in the same group of consumer" in r.out and "Rebalance OK" in r.out

        async def committed() -> bool:
            out = await admin(s, "consumerStatus", "-g", "cg_live", "-i", client_id)
            offsets = [x.split() for x in out.lines if x.startswith("Live ") and len(x.split()) == 4]
            return len(offsets) == 4 and sum(int(x[3]) for x in offsets) == 8

        await wait_for(committed)
        r = await admin(s, "consumerStatus", "-g", "cg_live", "-i", client_id)
        assert r.lines[0] == "#Consumer Properties#"
        assert re.search(r"^PROP_CONSUME_TYPE\s+: CONSUME_PASSIVELY$", r.out, re.M)
        assert re.search(r"^001 Topic: Live\s+ClassFilter: false\s+SubExpression: \*$", r.out, re.M)
        detail = [x for x in r.lines if x.startswith("Live") and "ProcessQueueInfo [" in x]
        assert len(detail) == 4 and all("droped=False" in x for x in detail)
        (rates,) = [x.split() for x in r.lines if x.startswith("Live") and len(x.split()) == 7]
        assert int(rates[6]) == 0  # no failed message

        async def broker_caught_up() -> bool:  # the consumer commits every 0.2 s
            return (await admin(s, "brokerConsumeStats", "-b", s.addr)).lines[-1:] == ["Diff Total: 0"]

        await wait_for(broker_caught_up)
        r = await admin(s, "brokerConsumeStats", "-b", s.addr)
        assert r.code == 0, r.err
        rows = [x.split() for x in r.lines if x.startswith("Live")]
        assert len(rows) == 4 and {x[1] for x in rows} == {"cg_live"} and all(x[6] == "0" for x in rows)
        assert r.lines[-1] == "Diff Total: 0"

        r = await admin(s, "getConsumerConfig", "-g", "cg_live")
        assert r.code == 0, r.err
        assert r.lines[0] == f"============================={CLUSTER}:broker-a============================="
        assert re.search(r"^groupName\s+=  cg_live$", r.out, re.M)
        one_line_error(await admin(s, "getConsumerConfig", "-g", "no_such_group"), "no_such_group")

    await s.broker.store.wait_dispatched()
    r = await admin(s, "cloneGroupOffset", "-s", "cg_live", "-d", "cg_copy", "-t", "Live")
    assert r.out.startswith("clone group offset success. srcGroup[cg_live], destGroup=[cg_copy], topic[Live]")
    assert s.broker.offsets.offsets_of("cg_copy", "Live") == s.broker.offsets.offsets_of("cg_live", "Live")

    async with Producer("pg_live2", s.ns) as producer:
        for i in range(3):
            await producer.send(Message("Live", f"later{i}"))
    await s.broker.store.wait_dispatched()
    r = await admin(s, "skipAccumulatedMessage", "-g", "cg_copy", "-t", "Live")
    assert r.code == 0, r.err
    assert sum(s.broker.offsets.offsets_of("cg_copy", "Live").values()) == 11
    assert [x.split()[0] for x in r.lines[1:]] == ["broker-a"] * 4


async def test_consumer_status_of_an_offline_group(servers: Servers) -> None:
    one_line_error(await admin(servers, "consumerStatus", "-g", "nobody_home"), "nobody_home")
    async with MQAdmin(servers.ns) as a:
        await create_topic(servers, "Quiet", queues=1)
        with trio.fail_after(LIMIT):
            try:
                await a.consumer_running_info("nobody_home", "10.0.0.1@1")
            except Exception as exc:  # the broker's answer, named
                assert "not online" in str(exc)
            else:
                raise AssertionError("running info of an offline client")
