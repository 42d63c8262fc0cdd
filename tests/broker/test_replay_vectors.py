"""Replay every request the official C++ client sent (tests/vectors/cpp-client) against
the broker, byte for byte on a raw socket, and check each answer is one that client
accepts: JSON serialization, response flag, echoed opaque, string-only extFields and a
plausible code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rmq.protocol import FrameDecoder, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.headers import CreateTopicRequestHeader

from .cluster import Cluster

ALLOWED = {
    RequestCode.SEND_MESSAGE: {ResponseCode.SUCCESS},
    RequestCode.PULL_MESSAGE: {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    },
    RequestCode.QUERY_CONSUMER_OFFSET: {ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND},
    RequestCode.UPDATE_CONSUMER_OFFSET: {ResponseCode.SUCCESS},
    RequestCode.GET_MAX_OFFSET: {ResponseCode.SUCCESS},
    RequestCode.HEART_BEAT: {ResponseCode.SUCCESS},
    RequestCode.UNREGISTER_CLIENT: {ResponseCode.SUCCESS},
    # the captured commit-log offset (5000) names no record in our store
    RequestCode.CONSUMER_SEND_MSG_BACK: {ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR},
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: {ResponseCode.SUCCESS},
    RequestCode.LOCK_BATCH_MQ: {ResponseCode.SUCCESS},
    RequestCode.UNLOCK_BATCH_MQ: {ResponseCode.SUCCESS},
}


def broker_requests(flow: Path) -> list[tuple[dict[str, Any], bytes]]:
    """(index entry, frame bytes) of each request the client sent to the broker."""
    out = []
    for line in (flow / "index.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["dir"] == "c2s" and entry["role"] == "broker" and not entry["header"]["flag"] & 1:
            out.append((entry, (flow / entry["file"]).read_bytes()))
    return out


async def replay(
    address: str, requests: list[tuple[dict[str, Any], bytes]]
) -> dict[int, tuple[int, dict[str, Any], bytes]]:
    """Send the frames in order on one connection, each after the previous one's answer
    (as the client did) except parked pulls; collect (serialize type, header, body) by opaque."""
    host, port = address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    answers: dict[int, tuple[int, dict[str, Any], bytes]] = {}
    arrived: dict[int, trio.Event] = {entry["header"]["opaque"]: trio.Event() for entry, _ in requests}
    async with stream, trio.open_nursery() as nursery:

        async def read() -> None:
            decoder = FrameDecoder()
            while len(answers) < len(arrived):
                data = await stream.receive_some(65536)
                assert data, "broker closed the connection"
                decoder.feed(data)
                for frame in decoder:
                    stype, hlen = frame[0], int.from_bytes(frame[1:4], "big")
                    header = json.loads(frame[4 : 4 + hlen])
                    if header["flag"] & 1:  # skip requests the broker sends us (NOTIFY...)
                        answers[header["opaque"]] = (stype, header, frame[4 + hlen :])
                        arrived[header["opaque"]].set()

        nursery.start_soon(read)
        for entry, frame in requests:
            await stream.send_all(frame)
            header = entry["header"]
            parks = header["code"] == RequestCode.PULL_MESSAGE and int(header["extFields"]["sysFlag"]) & 2
            if not parks:
                await arrived[header["opaque"]].wait()
    return answers


async def test_replay_every_captured_request(
    cluster: Cluster, vectors_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    create = CreateTopicRequestHeader(topic="TopicTest", read_queue_nums=4, write_queue_nums=4)
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())).code == ResponseCode.SUCCESS
    flows = sorted(p for p in vectors_dir.iterdir() if (p / "index.jsonl").exists())
    seen_codes: set[int] = set()
    for flow in flows:
        requests = broker_requests(flow)
        if not requests:
            continue
        with trio.fail_after(120):
            answers = await replay(cluster.broker.address, requests)
        for entry, _ in requests:
            code = entry["header"]["code"]
            seen_codes.add(code)
            stype, header, body = answers[entry["header"]["opaque"]]
            where = f"{flow.name}/{entry['file']}"
            assert stype == 0, where
            assert header["flag"] == 1, where
            assert header["code"] in ALLOWED[code], (where, header)
            assert all(isinstance(v, str) for v in header.get("extFields", {}).values()), (where, header)
            if code == RequestCode.PULL_MESSAGE:
                assert set(header["extFields"]) == {
                    "suggestWhichBrokerId",
                    "nextBeginOffset",
                    "minOffset",
                    "maxOffset",
                }, where
            if code == RequestCode.SEND_MESSAGE:
                assert {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"} <= set(header["extFields"])
            if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
                assert json_body.loads(body)["consumerIdList"], where
            if code == RequestCode.LOCK_BATCH_MQ:
                assert json_body.loads(body)["lockOKMQSet"], where
    assert seen_codes == set(ALLOWED)


async def test_cpp_batch_on_code_10_stores_three_messages(cluster: Cluster, vectors_dir: Path) -> None:
    requests = broker_requests(vectors_dir / "c_send_batch")
    sends = [r for r in requests if r[0]["header"]["code"] == RequestCode.SEND_MESSAGE]
    answers = await replay(cluster.broker.address, sends)
    ((_, header, _),) = answers.values()
    assert header["code"] == 0 and len(header["extFields"]["msgId"].split(",")) == 3
    await cluster.broker.store.wait_dispatched()
    queue = int(header["extFields"]["queueId"])
    assert cluster.broker.message_store.get_max_offset_in_queue("TopicTest", queue) == 3


@pytest.mark.parametrize("flow", ["g_push_consumer", "g3_push_consumer_tag_filter"])
async def test_cpp_heartbeat_registers_the_group_until_the_connection_closes(
    cluster: Cluster, vectors_dir: Path, flow: str
) -> None:
    requests = broker_requests(vectors_dir / flow)
    _, heartbeat = next(r for r in requests if r[0]["header"]["code"] == RequestCode.HEART_BEAT)
    host, port = cluster.broker.address.rsplit(":", 1)
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(heartbeat)
        decoder = FrameDecoder()
        with trio.fail_after(5):
            while not (frames := list(decoder)):
                decoder.feed(await stream.receive_some(65536))
        assert json.loads(frames[0][4 : 4 + int.from_bytes(frames[0][1:4], "big")])["code"] == 0
        info = cluster.broker.clients.consumer_group("CG_capture")
        assert info is not None and info.consume_type == "CONSUME_PASSIVELY"
        assert info.client_ids()[0].endswith("-127.0.0.1@DEFAULT")
        assert cluster.broker.topics.get("%RETRY%CG_capture") is not None
        sub = info.subscriptions["TopicTest"]
        if flow == "g3_push_consumer_tag_filter":
            assert sub.tags_set == ("TagA", "TagB") and 0 not in sub.code_set
    with trio.fail_after(5):
        while cluster.broker.clients.consumer_group("CG_capture") is not None:
            await trio.sleep(0.01)
