"""The dispatcher's pre-processing hook the ACL runs as (rmq.remoting.dispatcher, `hook=`)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import echo, raw_peer


async def test_hook_refuses_before_the_processor_runs(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    seen: list[str] = []

    async def processor(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ran.append(request.code)
        return await echo(ctx, request)

    def hook(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        seen.append(ctx.remote_address)
        if request.ext_fields.get("who") == "crash":
            raise RuntimeError("hook bug")
        if request.ext_fields.get("who") != "friend":
            return request.make_response(ResponseCode.NO_PERMISSION, "not you")
        return None

    d = Dispatcher(hook=hook)
    d.register(RequestCode.HEART_BEAT, processor)
    async with raw_peer(d) as (peer, _):
        for opaque, (who, oneway, code) in enumerate(
            [
                ("friend", False, RequestCode.HEART_BEAT),
                ("stranger", False, RequestCode.HEART_BEAT),
                ("stranger", True, RequestCode.HEART_BEAT),  # refused oneway: no answer
                ("stranger", False, 999),  # the hook runs before the code is looked up
                ("crash", False, RequestCode.HEART_BEAT),
            ],
            1,
        ):
            request = RemotingCommand.request(code, {"who": who}, oneway=oneway)
            request.opaque = opaque
            await peer.send(request)
        answers = []
        with trio.move_on_after(5):
            while len(answers) < 4:
                answers += await peer.receive_batch()
    by_opaque = {a.opaque: a for a in answers}
    assert sorted(by_opaque) == [1, 2, 4, 5]
    assert by_opaque[1].code == ResponseCode.SUCCESS
    assert (by_opaque[2].code, by_opaque[2].remark) == (ResponseCode.NO_PERMISSION, "not you")
    assert (by_opaque[4].code, by_opaque[4].remark) == (ResponseCode.NO_PERMISSION, "not you")
    assert (by_opaque[5].code, by_opaque[5].remark) == (ResponseCode.SYSTEM_ERROR, "RuntimeError: hook bug")
    assert ran == [RequestCode.HEART_BEAT]
    assert len(seen) == 5
    assert any("request hook failed" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
