"""Pipelined and oneway sends on one connection are stored in the order they arrived,
with ASYNC_FLUSH and SYNC_FLUSH alike (the send processor appends in the reader)."""

from __future__ import annotations

import struct

import pytest
import trio

from rmq.protocol import RPC_ONEWAY, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.message import iter_records

from .cluster import Cluster
from .test_send_pull import pull_ext, send_ext

COUNT = 300


async def _read_responses(stream: trio.SocketStream, count: int) -> list[RemotingCommand]:
    buf = bytearray()
    out: list[RemotingCommand] = []
    with trio.fail_after(20):
        while len(out) < count:
            data = await stream.receive_some(1 << 16)
            assert data, "the broker closed the connection"
            buf += data
            while len(buf) >= 4:
                (length,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + length:
                    break
                out.append(RemotingCommand.decode(bytes(buf[4 : 4 + length])))
                del buf[: 4 + length]
    return out


@pytest.mark.parametrize("broker_props", [{}, {"flushDiskType": "SYNC_FLUSH"}])
async def test_pipelined_sends_keep_arrival_order(cluster: Cluster) -> None:
    frames = []
    for i in range(COUNT):
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext(), b"msg-%d" % i)
        request.opaque = i
        if i % 3 == 1:
            request.flag |= RPC_ONEWAY
        frames.append(request.encode())
    answered = COUNT - len(range(1, COUNT, 3))
    host, port = cluster.broker.address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(b"".join(frames))  # all at once: many frames per read
        responses = await _read_responses(stream, answered)
    assert all(r.code == ResponseCode.SUCCESS for r in responses), [r.remark for r in responses[:3]]
    offsets = {r.opaque: int(r.ext_fields["queueOffset"]) for r in responses}
    assert offsets == {i: i for i in range(COUNT) if i % 3 != 1}  # queue offset = arrival index

    await cluster.broker.store.wait_dispatched()
    bodies: list[bytes] = []
    while len(bodies) < COUNT:
        pulled = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext(offset=len(bodies)))
        assert pulled.code == ResponseCode.SUCCESS
        bodies += [m.body for m in iter_records(pulled.body)]
    assert bodies == [b"msg-%d" % i for i in range(COUNT)]


@pytest.mark.parametrize("broker_props", [{"flushDiskType": "SYNC_FLUSH", "flushIntervalCommitLog": "60000"}])
async def test_sync_flush_bursts_are_answered_by_their_sync_not_the_flush_interval(cluster: Cluster) -> None:
    """Bursts of sends that land in one read: the group's first wait used to start a round
    that left the rest of the burst waiting for flushIntervalCommitLog."""
    host, port = cluster.broker.address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        for burst in range(20):
            frames = []
            for i in range(32):
                request = RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext(), b"b%d-%d" % (burst, i))
                request.opaque = burst * 32 + i
                frames.append(request.encode())
            await stream.send_all(b"".join(frames))
            responses = await _read_responses(stream, 32)  # fail_after(20); the interval is 60 s
            assert all(r.code == ResponseCode.SUCCESS for r in responses), [r.remark for r in responses[:3]]
    assert cluster.broker.store.flushed_offset >= cluster.broker.store.store.max_phy_offset


async def test_bad_send_in_a_pipeline_gets_its_error(cluster: Cluster) -> None:
    good = RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext(), b"ok")
    bad = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "TopicTest"}, b"no header")
    after = RemotingCommand.request(RequestCode.SEND_MESSAGE, send_ext(), b"ok too")
    for opaque, request in enumerate((good, bad, after)):
        request.opaque = opaque
    host, port = cluster.broker.address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(good.encode() + bad.encode() + after.encode())
        responses = {r.opaque: r for r in await _read_responses(stream, 3)}
    assert responses[0].code == ResponseCode.SUCCESS and responses[2].code == ResponseCode.SUCCESS
    assert responses[1].code == ResponseCode.SYSTEM_ERROR and responses[1].remark
    assert (responses[0].ext_fields["queueOffset"], responses[2].ext_fields["queueOffset"]) == ("0", "1")
