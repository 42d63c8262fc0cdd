"""Dispatch rules (PROTOCOL.md 1.4), checked frame by frame with a raw peer."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from rmq.protocol import (
    HeaderError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rmq.remoting import BUSY_OVERLOAD, BUSY_REJECT, Dispatcher, RequestContext
from rmq.remoting.stages.codec import CommandStream
from rmq.remoting.testing import echo, raw_peer


async def ask(peer: CommandStream, request: RemotingCommand, opaque: int = 1) -> RemotingCommand:
    request.opaque = opaque
    await peer.send(request)
    (response,) = await peer.receive_batch()
    assert response.opaque == opaque and response.is_response
    return response


async def expect_silence(peer: CommandStream, seconds: float = 5.0) -> None:
    with trio.move_on_after(seconds) as scope:
        got = await peer.receive_batch()
        pytest.fail(f"expected no answer, got {got}")
    assert scope.cancelled_caught


async def test_unknown_code_is_answered_even_when_oneway(autojump_clock: trio.testing.MockClock) -> None:
    async with raw_peer(Dispatcher()) as (peer, _):
        resp = await ask(peer, RemotingCommand.request(999))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 999 not supported"
        resp = await ask(peer, RemotingCommand.request(998, oneway=True), opaque=2)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_unknown_code_dropped_when_configured(autojump_clock: trio.testing.MockClock) -> None:
    async with raw_peer(Dispatcher(answer_unsupported=False)) as (peer, _):
        await peer.send(RemotingCommand.request(999))
        await expect_silence(peer)


async def test_default_processor_serves_unregistered_codes() -> None:
    d = Dispatcher()
    d.register(RequestCode.HEART_BEAT, echo)

    async def fallback(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "admin says no")

    d.register_default(fallback)
    assert d.codes == {RequestCode.HEART_BEAT}
    async with raw_peer(d) as (peer, _):
        assert (await ask(peer, RemotingCommand.request(RequestCode.HEART_BEAT))).code == ResponseCode.SUCCESS
        assert (await ask(peer, RemotingCommand.request(12345))).remark == "admin says no"


async def test_overload_answers_system_busy(autojump_clock: trio.testing.MockClock) -> None:
    release = trio.Event()
    started: list[str] = []

    async def blocked(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        started.append(request.ext_fields["n"])
        await release.wait()
        return request.make_response(ext_fields={"n": request.ext_fields["n"]})

    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, blocked, concurrency=1, queue_size=1)
    async with raw_peer(d) as (peer, _):
        for n in range(4):
            req = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n})
            req.opaque = n
            await peer.send(req)
        oneway = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": 9}, oneway=True)
        oneway.opaque = 9
        await peer.send(oneway)
        busy: list[RemotingCommand] = []
        while len(busy) < 2:
            busy += await peer.receive_batch()
        assert [(r.opaque, r.code, r.remark) for r in busy] == [
            (2, ResponseCode.SYSTEM_BUSY, BUSY_OVERLOAD),
            (3, ResponseCode.SYSTEM_BUSY, BUSY_OVERLOAD),
        ]
        assert (route.active, route.waiting) == (1, 1)
        release.set()
        done: list[RemotingCommand] = []
        while len(done) < 2:
            done += await peer.receive_batch()
        assert [(r.opaque, r.code) for r in done] == [(0, ResponseCode.SUCCESS), (1, ResponseCode.SUCCESS)]
        await expect_silence(peer)  # the oneway overload got no answer
        assert started == ["0", "1"]
        assert (route.active, route.waiting) == (0, 0)


async def test_reject_request_answers_busy_even_oneway() -> None:
    class PageCacheBusy:
        async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            raise AssertionError("never called")

        def reject_request(self) -> bool:
            return True

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, PageCacheBusy())
    async with raw_peer(d) as (peer, _):
        for oneway in (False, True):
            resp = await ask(peer, RemotingCommand.request(RequestCode.SEND_MESSAGE, oneway=oneway))
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_BUSY, BUSY_REJECT)


async def test_processor_errors(caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock) -> None:
    async def broken(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.ext_fields.get("header"):
            raise HeaderError("the custom header misses field topic")
        raise ValueError("bad thing\nsecond line\nthird")

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, broken)
    async with raw_peer(d) as (peer, _):
        with caplog.at_level(logging.INFO, logger="rmq.remoting"):
            resp = await ask(peer, RemotingCommand.request(RequestCode.SEND_MESSAGE))
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "ValueError: bad thing")
        assert any(r.exc_info for r in caplog.records), "the traceback is logged locally"
        resp = await ask(peer, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"header": 1}), opaque=2)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "the custom header misses field topic")
        await peer.send(RemotingCommand.request(RequestCode.SEND_MESSAGE, oneway=True))
        await expect_silence(peer)  # errors of oneway requests are only logged


async def test_bad_binary_ext_block_answers_system_error() -> None:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo)
    bad = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"}, serialize_type=SerializeType.ROCKETMQ)
    wire = bytearray(bad.encode())
    wire[8 + 21 + 1] = 0x7F  # corrupt the key length inside the extFields block
    async with raw_peer(d) as (peer, conn):
        await peer.stream.send_all(bytes(wire))
        (resp,) = await peer.receive_batch()
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert not conn.closed


async def test_none_means_no_response(autojump_clock: trio.testing.MockClock) -> None:
    async def silent(ctx: RequestContext, request: RemotingCommand) -> None:
        return None

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, silent)
    async with raw_peer(d) as (peer, _):
        await peer.send(RemotingCommand.request(RequestCode.PULL_MESSAGE))
        await expect_silence(peer)


async def test_response_follows_the_request() -> None:
    async def sloppy(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand(ResponseCode.SUCCESS, {"ok": True}, opaque=12345)  # wrong opaque, no flag

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, sloppy)
    async with raw_peer(d) as (peer, _):
        req = RemotingCommand.request(RequestCode.SEND_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
        resp = await ask(peer, req, opaque=77)
        assert resp.serialize_type == SerializeType.ROCKETMQ
        assert resp.ext_fields == {"ok": "true"}


async def test_bad_return_value_answers_system_error() -> None:
    async def wrong(ctx: RequestContext, request: RemotingCommand) -> object:
        return "not a command"

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, wrong)  # type: ignore[arg-type]
    async with raw_peer(d) as (peer, _):
        resp = await ask(peer, RemotingCommand.request(RequestCode.SEND_MESSAGE))
        assert resp.code == ResponseCode.SYSTEM_ERROR


async def test_inline_route() -> None:
    d = Dispatcher()
    d.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, echo, inline=True)
    async with raw_peer(d) as (peer, conn):
        for n in range(3):
            resp = await ask(peer, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"n": n}), opaque=n)
            assert resp.ext_fields == {"n": str(n)}
        assert conn.statistics().in_flight == 0


async def test_context_gives_connection_and_time(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[RequestContext] = []

    async def look(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        seen.append(ctx)
        ctx.connection.attrs["client_id"] = request.ext_fields["clientID"]
        return request.make_response()

    d = Dispatcher()
    d.register(RequestCode.HEART_BEAT, look)
    async with raw_peer(d) as (peer, conn):
        await trio.sleep(7)
        await ask(peer, RemotingCommand.request(RequestCode.HEART_BEAT, {"clientID": "c1"}))
        assert seen[0].connection is conn and seen[0].remote_address == "memory:peer"
        assert seen[0].received_at == pytest.approx(trio.current_time())
        assert conn.attrs == {"client_id": "c1"}


def test_registration_rules() -> None:
    d = Dispatcher()
    route = d.register([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2], echo, concurrency=4)
    assert d.route(RequestCode.SEND_MESSAGE) is d.route(RequestCode.SEND_MESSAGE_V2) is route
    assert d.route(1) is None
    with pytest.raises(ValueError, match="already registered"):
        d.register(RequestCode.SEND_MESSAGE, echo)
    d.register_default(echo)
    with pytest.raises(ValueError):
        d.register_default(echo)
    with pytest.raises(TypeError):
        d.register(1, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        d.register(2, echo, concurrency=0)


class _Counter:
    """A processor shared by everyone who asks the dispatcher for it."""

    def __init__(self) -> None:
        self.seen = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.seen += 1
        return request.make_response(ResponseCode.SUCCESS)


async def test_processor_of_makes_one_processor_per_code() -> None:
    dispatcher = Dispatcher()
    counter = dispatcher.processor_of(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, _Counter, inline=True)
    assert dispatcher.processor_of(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, _Counter) is counter
    route = dispatcher.route(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT)
    assert route is not None and route.inline
    async with raw_peer(dispatcher) as (peer, _):
        assert (await ask(peer, RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT))).code == 0
    assert counter.seen == 1
    dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, echo)
    with pytest.raises(ValueError, match="already registered"):  # another kind of processor holds the code
        dispatcher.processor_of(RequestCode.CHECK_TRANSACTION_STATE, _Counter)
