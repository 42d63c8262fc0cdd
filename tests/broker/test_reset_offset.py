"""INVOKE_BROKER_TO_RESET_OFFSET: back-tracking a group to a point in time, idle or running."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from rmq.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.body import MQKey
from rmq.remoting import Dispatcher, RemotingClient

from .cluster import Cluster
from .test_consumers import Notified
from .test_send_pull import send_ext


async def fill(cluster: Cluster) -> list[int]:
    """Two queues, three messages each, one virtual second apart; their store times."""
    r = await cluster.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Back", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    )
    assert r.code == 0
    times = []
    for _i in range(3):
        for qid in (0, 1):
            r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Back", queue_id=qid), b"m")
            assert r.code == 0
        times.append(cluster.broker.clock_ms())
        await trio.sleep(1)
    await cluster.broker.store.wait_dispatched()
    return times


def reset_ext(timestamp: int, force: bool = True, group: str = "RG", topic: str = "Back") -> dict[str, Any]:
    return {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}


def table_of(response: RemotingCommand) -> dict[MQKey, int]:
    return dict(json_body.loads(response.body)["offsetTable"])


async def test_idle_group_is_reset_in_the_offset_table(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    times = await fill(cluster)
    for qid in (0, 1):
        cluster.broker.offsets.commit("RG", "Back", qid, 3)
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(times[1]))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert table_of(r) == {MQKey("Back", "broker-a", 0): 1, MQKey("Back", "broker-a", 1): 1}
    assert cluster.broker.offsets.offsets_of("RG", "Back") == {0: 1, 1: 1}
    # one millisecond later skips the message stored at times[1]
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(times[1] + 1))
    assert set(table_of(r).values()) == {2}
    # before everything, after everything, and the end (-1)
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(0))
    assert set(table_of(r).values()) == {0}
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(times[-1] + 10_000))
    assert set(table_of(r).values()) == {3}
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(-1))
    assert set(table_of(r).values()) == {3}


async def test_without_force_a_group_behind_keeps_its_offset(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    times = await fill(cluster)
    cluster.broker.offsets.commit("RG", "Back", 0, 0)
    cluster.broker.offsets.commit("RG", "Back", 1, 3)
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(times[2], force=False))
    assert table_of(r) == {MQKey("Back", "broker-a", 0): 0, MQKey("Back", "broker-a", 1): 2}


async def test_running_consumers_are_told(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    times = await fill(cluster)
    seen = {"java": Notified(), "cpp": Notified()}
    dispatchers = {name: Dispatcher() for name in seen}
    for name, dispatcher in dispatchers.items():
        dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, seen[name])
    async with (
        RemotingClient(dispatcher=dispatchers["java"]) as java,
        RemotingClient(dispatcher=dispatchers["cpp"]) as cpp,
    ):
        for name, client, language in (("java", java, LanguageCode.JAVA), ("cpp", cpp, LanguageCode.CPP)):
            body = json.dumps(
                {
                    "clientID": f"{name}-client",
                    "consumerDataSet": [
                        {"groupName": "RG", "subscriptionDataSet": [{"topic": "Back", "subString": "*"}]}
                    ],
                }
            ).encode()
            hb = RemotingCommand(RequestCode.HEART_BEAT, body=body, language=language)
            assert (await client.invoke(cluster.broker.address, hb, 5)).code == 0
        r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(times[2]))
        assert r.code == 0
        with trio.fail_after(5):
            while not (seen["java"].requests and seen["cpp"].requests):
                await trio.sleep(0.05)
    (request,) = seen["java"].requests
    assert request.ext_fields == {"topic": "Back", "group": "RG", "timestamp": str(times[2]), "isForce": "true"}
    assert request.is_oneway
    assert dict(json_body.loads(request.body)["offsetTable"]) == {MQKey("Back", "broker-a", q): 2 for q in (0, 1)}
    (cpp_request,) = seen["cpp"].requests
    assert json_body.loads(cpp_request.body)["offsetTable"] == [
        {"brokerName": "broker-a", "queueId": q, "topic": "Back", "offset": 2} for q in (0, 1)
    ]


async def test_unknown_topic(cluster: Cluster) -> None:
    r = await cluster.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(0, topic="Nope"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "no topic" in (r.remark or "")
