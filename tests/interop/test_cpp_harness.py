"""Checks of the C++ client harness (``cpp_client.py``) itself, over real 127.0.0.1 sockets.

Two peers stand in for servers that are not under test here: a listener that accepts and
never answers (the harness must reach the name server it was given and end the child at
its hard deadline), and ``fake_cluster.FakeCluster``, a scripted name server and broker,
so that every scenario is seen end to end. Tests of rmq itself run the same scenarios
against our servers.
"""

from __future__ import annotations

import signal
import socket
import zlib
from pathlib import Path

import pytest
import trio

from .cpp_client import (
    Credentials,
    MessageSpec,
    ScenarioFailed,
    SendMethod,
    produce,
    pull_consume,
    push_consume,
    requires_cpp_client,
    run_scenario,
    run_sync,
    start_scenario,
)
from .fake_cluster import FakeCluster, decode_frame

pytestmark = [pytest.mark.interop, requires_cpp_client]


@pytest.fixture
async def fake(nursery: trio.Nursery) -> FakeCluster:
    cluster: FakeCluster = await nursery.start(FakeCluster().serve)
    return cluster


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_silent_name_server_gets_route_request_and_child_is_killed(nursery: trio.Nursery) -> None:
    first_frames: list[bytes] = []

    async def never_answer(stream: trio.SocketStream) -> None:
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        first_frames.append(data)
        await trio.sleep_forever()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, never_answer, listeners)
    port = listeners[0].socket.getsockname()[1]

    result = await run_scenario(produce(f"127.0.0.1:{port}", "TopicTest", time_limit=1.0), kill_after=3.0)

    header, body = decode_frame(first_frames[0][4:])
    assert header["code"] == 105  # GET_ROUTEINFO_BY_TOPIC
    assert (header["language"], header["version"]) == ("CPP", 63)
    assert header["extFields"]["topic"] == "TopicTest"
    assert body == b""
    assert result.timed_out
    assert result.returncode == -signal.SIGKILL
    assert [e["event"] for e in result.events] == ["started"]
    assert result.duration < 10
    with pytest.raises(ScenarioFailed, match="timed out and was killed"):
        result.check()


def test_sync_helper_reports_an_unreachable_name_server() -> None:
    result = run_sync(produce(f"127.0.0.1:{_closed_port()}", "TopicTest", 2, stop_on_error=True))

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
    result = run_sync(pull_consume(f"127.0.0.1:{_closed_port()}", "TopicTest"), work_dir=tmp_path)

    assert [e["error_type"] for e in result.errors] == ["NoQueues"]
    assert result.returncode == 1
    assert result.work_dir == tmp_path
    assert list((tmp_path / "logs" / "rocketmq-cpp").glob("*.log*"))


@pytest.mark.parametrize("method", ["sync", "oneway", "batch", "orderly", "oneway_orderly", "async"])
async def test_every_send_method_reaches_the_broker(fake: FakeCluster, method: SendMethod) -> None:
    spec = produce(fake.namesrv_addr, "TopicTest", 3, method=method, tags="TagA",
                   properties={"userKey": "v{i}"}, sharding_key=7)
    result = (await run_scenario(spec)).check()

    stored = [m for queue in fake.queues.values() for m in queue]
    assert sorted(m.body for m in stored) == [b"msg-0", b"msg-1", b"msg-2"]
    for m in stored:
        i = int(m.body.decode()[-1])
        assert {k: m.props[k] for k in ("KEYS", "TAGS", "userKey")} == {
            "KEYS": f"KEY-{i}", "TAGS": "TagA", "userKey": f"v{i}"}
    sends = result.sends
    if method == "batch":
        [send] = sends
        assert (send.count, send.status, send.msg_id) == (3, "OK", "")
        [request] = fake.requests_of(10)
        assert request.ext["batch"] == "1"
        return
    assert [s.index for s in sorted(sends, key=lambda s: s.index)] == [0, 1, 2]
    assert all(s.ok for s in sends)
    if method in ("sync", "orderly", "async"):
        assert all(s.status == "OK" for s in sends)
        assert {s.msg_id for s in sends} == {m.props["UNIQ_KEY"] for m in stored}
    if method in ("orderly", "oneway_orderly"):
        assert {(s.queue_index, s.queue_count) for s in sends} == {(3, 4)}  # 7 % 4
        assert [m.queue_id for m in stored] == [3, 3, 3]
        assert [s.offset for s in sends] == ([0, 1, 2] if method == "orderly" else [None] * 3)


async def test_message_options_credentials_and_compression(fake: FakeCluster) -> None:
    binary = b"\x00\x01binary\x00body"
    messages = [
        MessageSpec(body=b"y" * 5000, keys="BIG", tags="TagZ", delay_level=3, properties={"a": "1", "B": "2"}),
        MessageSpec(body=binary, keys="K1 K2"),
    ]
    spec = produce(fake.namesrv_addr, "TopicTest", messages=messages, group="PG_options",
                   credentials=Credentials("ak", "sk"))
    (await run_scenario(spec)).check()

    big, small = sorted((m for q in fake.queues.values() for m in q), key=lambda m: m.commit_log_offset)
    assert big.sys_flag & 1  # compressed from 4096 bytes on
    assert zlib.decompress(big.body) == b"y" * 5000
    assert {k: big.props[k] for k in ("DELAY", "KEYS", "TAGS", "a", "B")} == {
        "DELAY": "3", "KEYS": "BIG", "TAGS": "TagZ", "a": "1", "B": "2"}
    assert small.body == binary  # SetByteMessageBody keeps NUL bytes
    [route, *_] = fake.requests_of(105, role="namesrv")
    assert (route.ext["AccessKey"], route.ext["OnsChannel"]) == ("ak", "LOCAL")
    send = fake.requests_of(10)[0]
    assert send.ext["producerGroup"] == "PG_options"


async def test_push_consume_reports_fields_and_fails_first_delivery(fake: FakeCluster) -> None:
    for i in range(3):
        fake.put("TopicTest", 0, f"body-{i}".encode(), {"KEYS": f"K{i}", "TAGS": "TagA", "UNIQ_KEY": f"U{i}",
                                                        "userKey": "userValue"})
    spec = push_consume(fake.namesrv_addr, "TopicTest", 3, group="CG_fail", fail_first=1,
                        property_keys=("userKey",))
    result = (await run_scenario(spec)).check()

    first = result.deliveries[0]
    assert (first.result, first.delivery, first.reconsume_times) == ("RECONSUME_LATER", 0, 0)
    assert (first.topic, first.tags, first.keys, first.body) == ("TopicTest", "TagA", "K0", b"body-0")
    assert (first.msg_id, first.queue_id, first.queue_offset) == ("U0", 0, 0)
    assert first.properties["userKey"] == "userValue"
    assert first.commit_log_offset == fake.queues[("TopicTest", 0)][0].commit_log_offset
    # One failed callback fails the whole pulled batch: all three go back and come again.
    assert sorted(int(s["offset"]) for s in fake.sendbacks) == sorted(
        m.commit_log_offset for m in fake.queues[("TopicTest", 0)])
    assert sorted(m.keys for m in result.messages) == ["K0", "K1", "K2"]
    assert {(m.reconsume_times, m.properties.get("RETRY_TOPIC")) for m in result.messages} == {(1, "TopicTest")}
    assert fake.consumer_offsets[("CG_fail", "TopicTest", 0)] == 3
    [summary] = result.events_of("summary")
    assert summary == {**summary, "deliveries": 4, "consumed": 3, "callback_errors": 0}


async def test_push_consume_expression_filters_tags(fake: FakeCluster) -> None:
    for tag in ("TagA", "TagC", "TagB"):
        fake.put("TopicTest", 1, tag.encode(), {"TAGS": tag})
    spec = push_consume(fake.namesrv_addr, "TopicTest", 2, expression="TagA || TagB", linger=0.5)
    result = (await run_scenario(spec)).check()

    assert [m.tags for m in result.messages] == ["TagA", "TagB"]


async def test_orderly_push_consumer_locks_queues_and_retries_locally(fake: FakeCluster) -> None:
    for i in range(4):
        fake.put("TopicTest", 2, f"o{i}".encode(), {"KEYS": f"O{i}"})
    result = (await run_scenario(push_consume(fake.namesrv_addr, "TopicTest", 4, orderly=True, fail_first=1))).check()

    assert [m.body for m in result.deliveries] == [b"o0", b"o0", b"o1", b"o2", b"o3"]
    assert fake.sendbacks == []
    assert fake.requests_of(41)  # LOCK_BATCH_MQ
    assert fake.requests_of(42)  # UNLOCK_BATCH_MQ


async def test_consumer_started_first_then_cpp_producer_runs_concurrently(fake: FakeCluster) -> None:
    async with start_scenario(push_consume(fake.namesrv_addr, "TopicTest", 5, group="CG_live")) as run:
        started = await run.wait_for("started")
        assert started["pid"] == run.pid
        (await run_scenario(produce(fake.namesrv_addr, "TopicTest", 5))).check()
        result = (await run.wait()).check()

    assert sorted(m.body for m in result.messages) == [f"msg-{i}".encode() for i in range(5)]


async def test_pull_consume_reads_every_queue_from_start_offsets(fake: FakeCluster) -> None:
    for queue_id in range(4):
        for i in range(3):
            fake.put("TopicTest", queue_id, f"q{queue_id}-{i}".encode(), {"TAGS": "T"})
    result = (await run_scenario(pull_consume(fake.namesrv_addr, "TopicTest", start_offsets={0: 2}))).check()

    assert [(m.queue_id, m.queue_offset, m.body) for m in result.messages] == [
        (q, i, f"q{q}-{i}".encode()) for q in range(4) for i in range(3) if (q, i) not in ((0, 0), (0, 1))]
    assert {m.result for m in result.messages} == {"PULLED"}
    assert [q["queue_id"] for q in result.events_of("queues")[0]["queues"]] == [0, 1, 2, 3]
    assert {e["status"] for e in result.events_of("pull")} == {"FOUND", "NO_NEW_MSG"}


async def test_leaving_start_scenario_by_cancellation_kills_the_child(fake: FakeCluster) -> None:
    with trio.move_on_after(20) as scope:
        async with start_scenario(push_consume(fake.namesrv_addr, "TopicTest", 1, time_limit=60)) as run:
            await run.wait_for("started")
            pid = run.pid
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped
