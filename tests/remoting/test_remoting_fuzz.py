"""Fuzz a live server on 127.0.0.1 with random and mutated frames.

The server must never crash or hang, must close (or answer) every bad connection
promptly, must keep answering well-formed requests, must never log a traceback for a
peer's bytes, and must hold a bounded amount of memory throughout. The run is bounded
in count (CASES) and time (fail_after).
"""

from __future__ import annotations

import json
import logging
import random
import struct
import tracemalloc
from collections.abc import Callable

import pytest
import trio

from rmq.protocol import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
)
from rmq.remoting import Dispatcher, RemotingClient, RemotingServer
from rmq.remoting.stages.codec import DEFAULT_RECEIVE_SIZE
from rmq.remoting.testing import echo, serve_on_loopback

CASES = 400
PARALLEL = 16
MAX_FRAME = 64 * 1024


def valid_frame(rng: random.Random) -> bytes:
    stype = rng.choice([SerializeType.JSON, SerializeType.ROCKETMQ])
    code = rng.choice([RequestCode.SEND_MESSAGE, RequestCode.HEART_BEAT, rng.randrange(0, 400)])
    ext = {f"k{i}": rng.choice(["v", "", "ü" * 3, str(rng.random())]) for i in range(rng.randrange(4))}
    cmd = RemotingCommand.request(code, ext, rng.randbytes(rng.randrange(200)), serialize_type=stype)
    cmd.opaque = rng.randrange(2**31)
    return cmd.encode()


def json_header_frame(header: object, body: bytes = b"") -> bytes:
    return encode_frame(0, json.dumps(header).encode(), body)


WRONG_TYPES: list[object] = [
    {"code": "ten"},
    {"code": [1]},
    {"code": 10, "extFields": [1, 2]},
    {"code": 10, "extFields": {"a": [1], "b": {"c": 2}, "d": None, "e": 1.5, "f": True}},
    {"code": 10, "language": 999},
    {"code": 10, "language": None},
    {"code": 10, "opaque": 1.5},
    {"code": 10, "flag": 2**80},
    {"code": 10, "version": None},
    {"code": 2**70},
    {"code": 10, "remark": {"x": 1}},
    [],
    "a string",
    None,
]


def mutations(rng: random.Random) -> list[Callable[[], bytes]]:
    return [
        lambda: rng.randbytes(rng.randrange(2000)),  # random bytes
        lambda: (f := valid_frame(rng))[: rng.randrange(len(f))],  # truncated
        lambda: struct.pack(">i", rng.choice([-1, 0, 3, MAX_FRAME, 2**31 - 1])) + valid_frame(rng)[4:],  # bad length
        lambda: struct.pack(">i", MAX_FRAME * 4) + rng.randbytes(rng.randrange(MAX_FRAME)),  # oversized, partial
        lambda: encode_frame(0, rng.randbytes(rng.randrange(1, 300))),  # garbage JSON
        lambda: encode_frame(0, b"{" * rng.randrange(1, 5000)),  # deep / unbalanced JSON
        lambda: json_header_frame(rng.choice(WRONG_TYPES), rng.randbytes(rng.randrange(50))),  # wrong types
        lambda: encode_frame(1, rng.randbytes(rng.randrange(60))),  # random binary header
        lambda: flip(rng, valid_frame(rng)),  # bit flips
        lambda: struct.pack(">iI", 20, (rng.randrange(256) << 24) | rng.randrange(1 << 24)) + bytes(16),  # header word
        lambda: b"".join(valid_frame(rng) for _ in range(rng.randrange(1, 5))) + rng.randbytes(rng.randrange(100)),
        lambda: b"\x16\x03\x01" + rng.randbytes(rng.randrange(300)),  # a TLS-looking start on a plain server
        lambda: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ]


def flip(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


async def throw(server: RemotingServer, payload: bytes) -> None:
    """Send `payload`, half-close, read until the server closes. Whatever comes back must
    be well-formed responses."""
    assert server.port is not None
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    received = bytearray()
    try:
        with trio.fail_after(10):  # a hang fails the test
            try:
                await stream.send_all(payload)
                await stream.send_eof()
                while data := await stream.receive_some():
                    received += data
            except trio.BrokenResourceError:
                pass  # closed with our bytes unread: a reset
    finally:
        await stream.aclose()
    dec = FrameDecoder()
    dec.feed(bytes(received))
    for frame in dec:
        response = RemotingCommand.decode(frame)
        assert response.is_response
        _ = response.ext_fields


@pytest.mark.slow
async def test_fuzz_live_server(caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(20240601)
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    d = Dispatcher()
    d.register([RequestCode.SEND_MESSAGE, RequestCode.HEART_BEAT], echo)
    worst_buffered = 0
    tracemalloc.start()
    try:
        async with serve_on_loopback(d, max_frame_size=MAX_FRAME, idle_timeout=30) as server:
            baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()

            async def watch() -> None:
                nonlocal worst_buffered
                while True:
                    for conn in server.connections:
                        worst_buffered = max(worst_buffered, conn.statistics().buffered)
                    await trio.sleep(0.001)

            kinds = mutations(rng)
            payloads = [rng.choice(kinds)() for _ in range(CASES)]
            with trio.fail_after(120):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch)
                    for start in range(0, CASES, PARALLEL):
                        async with trio.open_nursery() as batch:
                            for payload in payloads[start : start + PARALLEL]:
                                batch.start_soon(throw, server, payload)
                    nursery.cancel_scope.cancel()

            peak = tracemalloc.get_traced_memory()[1] - baseline
            # still serving well-formed requests
            async with RemotingClient() as client:
                for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
                    req = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"a": 1}, b"ok", serialize_type=stype)
                    resp = await client.invoke(server.address, req, 5)
                    assert (resp.code, resp.body) == (ResponseCode.SUCCESS, b"ok")
            with trio.fail_after(5):
                while server.connections:
                    await trio.sleep(0.01)
    finally:
        tracemalloc.stop()

    assert worst_buffered <= MAX_FRAME + DEFAULT_RECEIVE_SIZE
    # PARALLEL connections, each holding at most about a frame, plus bookkeeping
    assert peak < 16 * 1024 * 1024, f"peak {peak} bytes"
    bugs = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bugs, [r.getMessage() for r in bugs]
    closes = [r.getMessage() for r in caplog.records if "closed:" in r.getMessage()]
    assert any("protocol error" in m for m in closes)
