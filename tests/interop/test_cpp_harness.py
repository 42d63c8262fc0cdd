"""Checks of the C++ client harness (``cpp_client.py``) itself, over real 127.0.0.1 sockets.

Two tests need no server: a listener that accepts and never answers (the harness must
reach the name server it was given and end the child at its hard deadline) and a closed
port (an unreachable name server must be reported). Every other scenario runs end to end
against our real name server and broker (the ``cluster`` fixture, ``conftest.py``), and
its results are checked against what the broker stored or answers, read over the wire
with our own client. The C++ client's own log stands in where only the client knows
(the ACL fields it signs; our broker runs with ACL off and ignores them).
"""

from __future__ import annotations

import json
import signal
import socket
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from rmq.protocol import FrameDecoder, LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.message import MessageExt, decompress_body, iter_records, parse_offset_msg_id
from tests.broker.cluster import Cluster
from tests.broker.test_send_pull import pull_ext, send_ext

from .cpp_client import (
    Credentials,
    MessageSpec,
    ScenarioFailed,
    ScenarioResult,
    SendMethod,
    produce,
    pull_consume,
    push_consume,
    requires_cpp_client,
    run_scenario,
    run_sync,
    start_scenario,
)

pytestmark = [pytest.mark.interop, requires_cpp_client]

TOPIC = "TopicTest"
QUEUES = 4
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: Every delay level 1 s, so a sent-back message comes again after about a second.
SHORT_DELAYS = {"messageDelayLevel": " ".join(["1s"] * 18)}


# ---------------------------------------------------------------------------------------------
# helpers: our own client against the real broker


async def create_topic(cluster: Cluster, topic: str = TOPIC, queues: int = QUEUES) -> None:
    """Create the topic up front: a C++ consumer of an unknown topic waits ~30 s for a route refresh."""
    r = await cluster.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6},
    )
    assert r.code == ResponseCode.SUCCESS, r.remark


async def put(cluster: Cluster, queue_id: int, body: bytes, props: dict[str, str], topic: str = TOPIC) -> int:
    """Store one message with a raw SEND_MESSAGE; its CommitLog offset."""
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic=topic, queue_id=queue_id, props=props), body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return parse_offset_msg_id(r.ext_fields["msgId"])[2]


async def stored(cluster: Cluster, topic: str = TOPIC, queues: int = QUEUES) -> list[MessageExt]:
    """Every message of ``topic`` as a raw PULL_MESSAGE from offset 0 returns it, queue by queue."""
    await cluster.broker.store.wait_dispatched()
    out: list[MessageExt] = []
    for queue_id in range(queues):
        r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext(topic, queue_id, 0))
        if r.code == ResponseCode.SUCCESS:
            out.extend(iter_records(r.body))
        else:
            assert r.code == ResponseCode.PULL_NOT_FOUND, (r.code, r.remark)
    return out


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Poll an async ``predicate`` until it is true (the broker handles oneway requests later)."""
    with trio.move_on_after(timeout):
        while not await predicate():
            await trio.sleep(0.05)


async def stored_count(cluster: Cluster, topic: str = TOPIC, queues: int = QUEUES) -> int:
    total = 0
    for queue_id in range(queues):
        r = await cluster.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
        assert r.code == ResponseCode.SUCCESS, r.remark
        total += int(r.ext_fields["offset"])
    return total


async def consumer_offset(cluster: Cluster, group: str, queue_id: int, topic: str = TOPIC) -> int | None:
    r = await cluster.call(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id}
    )
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else None


async def has_stored(cluster: Cluster, n: int) -> bool:
    return await stored_count(cluster) >= n


async def offset_is(cluster: Cluster, group: str, queue_id: int, offset: int) -> bool:
    return await consumer_offset(cluster, group, queue_id) == offset


async def lock_queues(cluster: Cluster, group: str, client_id: str, queue_ids: list[int]) -> set[int]:
    """LOCK_BATCH_MQ as another client of ``group``: the queues it got."""
    body = {
        "consumerGroup": group,
        "clientId": client_id,
        "mqSet": [{"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in queue_ids],
    }
    r = await cluster.call(RequestCode.LOCK_BATCH_MQ, body=json.dumps(body).encode())
    assert r.code == ResponseCode.SUCCESS, r.remark
    return {mq["queueId"] for mq in json.loads(r.body)["lockOKMQSet"]}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------
# no server


async def test_silent_name_server_gets_route_request_and_child_is_killed(nursery: trio.Nursery) -> None:
    first_frames: list[bytes] = []

    async def never_answer(stream: trio.SocketStream) -> None:
        frames = FrameDecoder()
        while not first_frames:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            frames.feed(chunk)
            first_frames.extend(frames)
        await trio.sleep_forever()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, never_answer, listeners)
    port = listeners[0].socket.getsockname()[1]

    result = await run_scenario(produce(f"127.0.0.1:{port}", TOPIC, time_limit=1.0), kill_after=3.0)

    request = RemotingCommand.decode(first_frames[0])
    assert request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert (request.language, request.version) == (LanguageCode.CPP, 63)
    assert request.ext_fields["topic"] == TOPIC
    assert request.body == b""
    assert result.timed_out
    assert result.returncode == -signal.SIGKILL
    assert [e["event"] for e in result.events] == ["started"]
    assert result.duration < 10
    with pytest.raises(ScenarioFailed, match="timed out and was killed"):
        result.check()


def test_sync_helper_reports_an_unreachable_name_server() -> None:
    result = run_sync(produce(f"127.0.0.1:{_closed_port()}", TOPIC, 2, stop_on_error=True))

    assert result.completed
    assert not result.timed_out
    assert result.returncode == 1
    [send] = result.sends
    assert not send.ok
    assert send.error_type == "ProducerSendSyncFailed"
    assert "No route info" in (send.error or "")
    assert "No route info" in result.client_log
    assert result.work_dir is None  # the temporary HOME was removed


def test_pull_reports_no_queues_when_the_name_server_is_unreachable(tmp_path: Path) -> None:
    result = run_sync(pull_consume(f"127.0.0.1:{_closed_port()}", TOPIC), work_dir=tmp_path)

    assert [e["error_type"] for e in result.errors] == ["NoQueues"]
    assert result.returncode == 1
    assert result.work_dir == tmp_path
    assert list((tmp_path / "logs" / "rocketmq-cpp").glob("*.log*"))


# ---------------------------------------------------------------------------------------------
# our name server and broker


@pytest.mark.parametrize("method", ["sync", "oneway", "batch", "orderly", "oneway_orderly", "async"])
async def test_every_send_method_reaches_the_broker(cluster: Cluster, method: SendMethod) -> None:
    await create_topic(cluster)
    spec = produce(
        cluster.namesrv.address, TOPIC, 3, method=method, tags="TagA", properties={"userKey": "v{i}"}, sharding_key=7
    )
    result = (await run_scenario(spec)).check()

    await wait_until(lambda: has_stored(cluster, 3))  # a oneway send is still on its way when the child exits
    messages = await stored(cluster)
    assert sorted(m.body for m in messages) == [b"msg-0", b"msg-1", b"msg-2"]
    for m in messages:
        i = int(m.body.decode()[-1])
        assert {k: m.properties.get(k) for k in ("KEYS", "TAGS", "userKey")} == {
            "KEYS": f"KEY-{i}",
            "TAGS": "TagA",
            "userKey": f"v{i}",
        }
    sends = result.sends
    if method == "batch":
        [send] = sends
        assert (send.count, send.status, send.msg_id) == (3, "OK", "")
        # one SEND_BATCH_MESSAGE: the three landed together, in order, in one queue
        assert len({m.queue_id for m in messages}) == 1
        assert [(m.queue_offset, m.body) for m in messages] == [(i, f"msg-{i}".encode()) for i in range(3)]
        assert send.offset == 0
        return
    assert [s.index for s in sorted(sends, key=lambda s: s.index)] == [0, 1, 2]
    assert all(s.ok for s in sends)
    if method in ("sync", "orderly", "async"):
        assert all(s.status == "OK" for s in sends)
        # each result names the message the broker stored: its UNIQ_KEY and queue offset
        assert {(s.msg_id, s.offset) for s in sends} == {(m.properties["UNIQ_KEY"], m.queue_offset) for m in messages}
    if method in ("orderly", "oneway_orderly"):
        assert {(s.queue_index, s.queue_count) for s in sends} == {(3, QUEUES)}  # 7 % 4
        assert [(m.queue_id, m.queue_offset) for m in messages] == [(3, 0), (3, 1), (3, 2)]
        if method == "orderly":  # each send waited for its result, so they were stored in order
            assert [m.body for m in messages] == [b"msg-0", b"msg-1", b"msg-2"]
            assert [s.offset for s in sorted(sends, key=lambda s: s.index)] == [0, 1, 2]
        else:  # oneway: the broker may store back-to-back sends in either order
            assert [s.offset for s in sends] == [None] * 3


async def test_message_options_credentials_and_compression(cluster: Cluster) -> None:
    await create_topic(cluster)
    binary = b"\x00\x01binary\x00body"
    messages = [
        MessageSpec(body=b"y" * 5000, keys="BIG", tags="TagZ", delay_level=3, properties={"a": "1", "B": "2"}),
        MessageSpec(body=binary, keys="K1 K2"),
    ]
    spec = produce(
        cluster.namesrv.address,
        TOPIC,
        messages=messages,
        group="PG_options",
        credentials=Credentials("AK_harness", "sk"),
        log_level="debug",
    )
    result = (await run_scenario(spec)).check()

    # delay level 3: the broker parked the big one in SCHEDULE_TOPIC_XXXX queue 2
    [big] = [m for m in await stored(cluster, SCHEDULE_TOPIC, 18) if m.properties.get("KEYS") == "BIG"]
    assert big.queue_id == 2
    assert big.sys_flag & 1  # compressed from 4096 bytes on
    assert big.body != b"y" * 5000
    assert zlib.decompress(big.body) == decompress_body(big.body, big.sys_flag) == b"y" * 5000
    assert {k: big.properties.get(k) for k in ("DELAY", "KEYS", "TAGS", "a", "B", "REAL_TOPIC")} == {
        "DELAY": "3",
        "KEYS": "BIG",
        "TAGS": "TagZ",
        "a": "1",
        "B": "2",
        "REAL_TOPIC": TOPIC,
    }
    [small] = await stored(cluster)
    assert small.body == binary  # SetByteMessageBody keeps NUL bytes
    assert small.sys_flag & 1 == 0
    assert small.properties["KEYS"] == "K1 K2"
    # The credentials reached the client: it signs AccessKey + OnsChannel (+ the request's
    # fields, sorted by name) into every request, the route request first. Our broker runs
    # with ACL off and ignores them, so only the client's debug log shows them. The send
    # request it signed carries the producer group the harness gave it.
    assert "total msg info are:AK_harnessLOCALTopicTest," in result.client_log
    assert "PG_options" in next(
        line
        for line in result.client_log.splitlines()
        if "total msg info are:AK_harnessLOCAL" in line and "K1 K2" in line
    )


@pytest.mark.parametrize("broker_props", [SHORT_DELAYS])
async def test_push_consume_reports_fields_and_fails_first_delivery(cluster: Cluster) -> None:
    await create_topic(cluster)
    # the retry topic too: else the consumer finds no route for it at start and first
    # allocates its queue at a rebalance 10 s later
    await create_topic(cluster, "%RETRY%CG_fail", 1)
    commit_offsets = [
        await put(
            cluster,
            0,
            f"body-{i}".encode(),
            {"KEYS": f"K{i}", "TAGS": "TagA", "UNIQ_KEY": f"U{i}", "userKey": "userValue"},
        )
        for i in range(3)
    ]
    spec = push_consume(cluster.namesrv.address, TOPIC, 3, group="CG_fail", fail_first=1, property_keys=("userKey",))
    result = (await run_scenario(spec)).check()

    first = result.deliveries[0]
    assert (first.result, first.delivery, first.reconsume_times) == ("RECONSUME_LATER", 0, 0)
    assert (first.topic, first.tags, first.keys, first.body) == (TOPIC, "TagA", "K0", b"body-0")
    assert (first.msg_id, first.queue_id, first.queue_offset) == ("U0", 0, 0)
    assert first.properties["userKey"] == "userValue"
    assert first.commit_log_offset == commit_offsets[0]
    # One failed callback fails the whole pulled batch: all three were sent back, went
    # through SCHEDULE_TOPIC_XXXX into %RETRY%CG_fail, and came again from there.
    retried = await stored(cluster, "%RETRY%CG_fail", 1)
    assert sorted(m.properties["KEYS"] for m in retried) == ["K0", "K1", "K2"]
    assert {(m.reconsume_times, m.properties["RETRY_TOPIC"]) for m in retried} == {(1, TOPIC)}
    assert sorted(m.keys for m in result.messages) == ["K0", "K1", "K2"]
    assert {(m.topic, m.reconsume_times, m.properties.get("RETRY_TOPIC")) for m in result.messages} == {
        (TOPIC, 1, TOPIC)
    }
    assert sorted(m.msg_id for m in result.messages) == ["U0", "U1", "U2"]
    await wait_until(lambda: offset_is(cluster, "CG_fail", 0, 3))
    assert await consumer_offset(cluster, "CG_fail", 0) == 3
    [summary] = result.events_of("summary")
    assert summary == {**summary, "deliveries": 4, "consumed": 3, "callback_errors": 0}


async def test_push_consume_expression_filters_tags(cluster: Cluster) -> None:
    await create_topic(cluster)
    for tag in ("TagA", "TagC", "TagB"):
        await put(cluster, 1, tag.encode(), {"TAGS": tag})
    spec = push_consume(cluster.namesrv.address, TOPIC, 2, group="CG_filter", expression="TagA || TagB", linger=0.5)
    result = (await run_scenario(spec)).check()

    assert [m.tags for m in result.messages] == ["TagA", "TagB"]
    assert [m.queue_offset for m in result.messages] == [0, 2]
    # the group's committed offset moved past all three, TagC included
    await wait_until(lambda: offset_is(cluster, "CG_filter", 1, 3))
    assert await consumer_offset(cluster, "CG_filter", 1) == 3


async def test_orderly_push_consumer_locks_queues_and_retries_locally(cluster: Cluster) -> None:
    await create_topic(cluster)
    for i in range(4):
        await put(cluster, 2, f"o{i}".encode(), {"KEYS": f"O{i}"})
    spec = push_consume(cluster.namesrv.address, TOPIC, 4, group="CG_orderly", orderly=True, fail_first=1, linger=2.0)
    async with start_scenario(spec) as run:
        await run.wait_for("message", where=lambda e: e["keys"] == "O3")
        # the C++ client holds the broker's locks on its queues: another client gets none
        assert await lock_queues(cluster, "CG_orderly", "other@client", list(range(QUEUES))) == set()
        assert not [e for e in run.events if e["event"] == "shutdown"], "asked after the consumer's linger"
        result = (await run.wait()).check()

    assert [m.body for m in result.deliveries] == [b"o0", b"o0", b"o1", b"o2", b"o3"]
    assert [m.result for m in result.deliveries[:2]] == ["RECONSUME_LATER", "CONSUME_SUCCESS"]
    # retried locally: the same message from the same queue, nothing sent back
    assert {(m.topic, m.queue_id, m.queue_offset) for m in result.deliveries[:2]} == {(TOPIC, 2, 0)}
    assert await stored_count(cluster, "%RETRY%CG_orderly", 1) == 0
    assert await stored_count(cluster, SCHEDULE_TOPIC, 18) == 0

    # It unlocked them when it shut down, all but the first: the client's unlockAll (1.2.3)
    # creates each broker's list without adding the queue that created it. The broker's
    # lock on queue 0 lasts until it expires.
    async def unlocked() -> bool:
        return await lock_queues(cluster, "CG_orderly", "other@client", list(range(QUEUES))) == {1, 2, 3}

    await wait_until(unlocked)
    assert await lock_queues(cluster, "CG_orderly", "other@client", list(range(QUEUES))) == {1, 2, 3}


async def test_consumer_started_first_then_cpp_producer_runs_concurrently(cluster: Cluster) -> None:
    await create_topic(cluster)
    ns = cluster.namesrv.address
    async with start_scenario(push_consume(ns, TOPIC, 5, group="CG_live")) as run:
        started = await run.wait_for("started")
        assert started["pid"] == run.pid
        assert await stored_count(cluster) == 0
        sent = (await run_scenario(produce(ns, TOPIC, 5))).check()
        result = (await run.wait()).check()

    assert sorted(m.body for m in result.messages) == [f"msg-{i}".encode() for i in range(5)]
    assert {m.msg_id for m in result.messages} == {s.msg_id for s in sent.sends}
    assert {m.topic for m in result.messages} == {TOPIC}


async def test_pull_consume_reads_every_queue_from_start_offsets(cluster: Cluster) -> None:
    await create_topic(cluster)
    for queue_id in range(QUEUES):
        for i in range(3):
            await put(cluster, queue_id, f"q{queue_id}-{i}".encode(), {"TAGS": "T"})
    result = (await run_scenario(pull_consume(cluster.namesrv.address, TOPIC, start_offsets={0: 2}))).check()

    assert [(m.queue_id, m.queue_offset, m.body) for m in result.messages] == [
        (q, i, f"q{q}-{i}".encode()) for q in range(QUEUES) for i in range(3) if (q, i) not in ((0, 0), (0, 1))
    ]
    assert {m.result for m in result.messages} == {"PULLED"}
    assert [q["queue_id"] for q in result.events_of("queues")[0]["queues"]] == list(range(QUEUES))
    pulls = result.events_of("pull")
    assert {e["status"] for e in pulls} == {"FOUND", "NO_NEW_MSG"}
    assert [e["offset"] for e in pulls if e["queue_id"] == 0][0] == 2
    assert {(e["queue_id"], e["max_offset"]) for e in pulls} == {(q, 3) for q in range(QUEUES)}


async def test_leaving_start_scenario_by_cancellation_kills_the_child(cluster: Cluster) -> None:
    await create_topic(cluster)
    with trio.move_on_after(20) as scope:
        async with start_scenario(push_consume(cluster.namesrv.address, TOPIC, 1, time_limit=60)) as run:
            await run.wait_for("started")
            pid = run.pid
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped


async def test_a_producer_asked_to_stop_ends_cleanly_long_before_its_time_limit(cluster: Cluster) -> None:
    await create_topic(cluster)
    spec = produce(cluster.namesrv.address, TOPIC, 100_000, method="sync", time_limit=60)
    async with start_scenario(spec) as run:
        await run.wait_for("send", where=lambda e: e["index"] == 20)
        run.stop_sending()
        result = (await run.wait()).check()  # exit code 0: every send it tried was OK
    (stopped,) = result.events_of("stopped")
    assert 20 < stopped["index"] == len(result.sends) < 100_000
    assert all(s.ok for s in result.sends)
    assert result.duration < 30
    with trio.fail_after(10):  # dispatch to the consume queues may trail the last answer
        while await stored_count(cluster) < len(result.sends):
            await trio.sleep(0.05)
    assert await stored_count(cluster) == len(result.sends)


def test_an_abort_inside_the_clients_own_shutdown_counts_only_after_a_clean_run() -> None:
    """librocketmq 0.4.4 sometimes aborts in a push consumer's shutdown (boost::thread_interrupted
    escaping one of its threads): that is the client's, once the scenario had done its work."""
    spec = push_consume("127.0.0.1:1", "T", 1)
    stderr = "terminate called after throwing an instance of 'boost::thread_interrupted'\nFatal Python error: Aborted"

    def result(events: list[dict[str, object]], returncode: int = -6, err: str = stderr) -> ScenarioResult:
        return ScenarioResult(spec, returncode, False, 1.0, events, [], err, "", None)

    message = {"event": "message", "result": "CONSUME_SUCCESS"}
    assert result([message, {"event": "shutting_down", "ok": True}]).ok
    assert not result([message, {"event": "shutting_down", "ok": False}]).ok  # not all consumed
    assert not result([message]).ok  # died before shutting down
    assert not result([message, {"event": "shutting_down", "ok": True}], err="Segmentation fault").ok
    assert not result([message, {"event": "shutting_down", "ok": True}], returncode=-11).ok
