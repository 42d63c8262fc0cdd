"""Ordered routes (a processor with `begin`): started in the reader in arrival order, the
wait moved to a worker, the route's bounds and error answers kept."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import BUSY_OVERLOAD, Dispatcher, Later, RequestContext
from rmq.remoting.testing import raw_peer


class Appender:
    """Appends each request's body at `begin`; bodies starting with b"wait" then wait for
    `release`, b"bad" raise."""

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.release = trio.Event()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        raise AssertionError("an ordered route starts requests with begin()")

    def begin(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        if request.body.startswith(b"bad"):
            raise ValueError("bad body")
        self.log.append(request.body)
        if request.body.startswith(b"wait"):
            return self._finish(request)
        return request.make_response(ResponseCode.SUCCESS, request.body.decode())

    async def _finish(self, request: RemotingCommand) -> RemotingCommand:
        await self.release.wait()
        return request.make_response(ResponseCode.SUCCESS, request.body.decode())


def _request(opaque: int, body: bytes, *, oneway: bool = False) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=body, oneway=oneway)
    request.opaque = opaque
    return request


async def test_begin_runs_in_arrival_order_and_waits_apart() -> None:
    appender = Appender()
    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, appender, concurrency=1000)
    async with raw_peer(d) as (peer, _):
        sent = [b"wait-%d" % i if i % 2 else b"now-%d" % i for i in range(200)]
        for i, body in enumerate(sent):
            await peer.send(_request(i, body, oneway=i % 5 == 4))
        await peer.send(_request(999, b"bad"))
        answers: dict[int, RemotingCommand] = {}
        with trio.fail_after(5):
            # the immediate ones and the error come first, while the waits still wait
            while len(answers) < 81:
                for r in await peer.receive_batch():
                    answers[r.opaque] = r
            assert appender.log == sent
            assert answers.pop(999).code == ResponseCode.SYSTEM_ERROR
            assert sorted(answers) == [i for i in range(0, 200, 2) if i % 5 != 4]
            appender.release.set()
            while len(answers) < 160:
                for r in await peer.receive_batch():
                    answers[r.opaque] = r
        assert sorted(answers) == [i for i in range(200) if i % 5 != 4]
        assert all(answers[i].remark == sent[i].decode() for i in answers)
        await trio.testing.wait_all_tasks_blocked()
        assert (route.active, route.waiting) == (0, 0)


async def test_full_ordered_route_answers_busy() -> None:
    appender = Appender()
    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, appender, concurrency=2, queue_size=0)
    async with raw_peer(d) as (peer, _):
        for i in range(3):
            await peer.send(_request(i, b"wait-%d" % i))
        with trio.fail_after(5):
            (busy,) = await peer.receive_batch()
        assert (busy.opaque, busy.code, busy.remark) == (2, ResponseCode.SYSTEM_BUSY, BUSY_OVERLOAD)
        assert appender.log == [b"wait-0", b"wait-1"]  # the refused one was never started
        appender.release.set()
        got: set[int] = set()
        with trio.fail_after(5):
            while len(got) < 2:
                got |= {r.opaque for r in await peer.receive_batch()}
        assert got == {0, 1}
        await trio.testing.wait_all_tasks_blocked()
        assert (route.active, route.waiting) == (0, 0)


class LaterAppender:
    """`begin` answers through a `Later` that the test settles from its own task, as a
    store's flusher settles the sends that waited for its sync round."""

    def __init__(self) -> None:
        self.waiting: list[tuple[RemotingCommand, Later]] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        raise AssertionError("an ordered route starts requests with begin()")

    def begin(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        later = Later()
        self.waiting.append((request, later))
        return later

    def settle_all(self) -> None:
        for request, later in self.waiting:
            if request.body == b"fail":
                later.settle(ValueError("no disk"))
            else:
                later.settle(request.make_response(ResponseCode.SUCCESS, request.body.decode()))
        self.waiting.clear()


async def test_a_later_is_answered_from_the_task_that_settles_it() -> None:
    appender = LaterAppender()
    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, appender, concurrency=1000)
    async with raw_peer(d, outbox_size=16) as (peer, conn):
        bodies = [b"fail" if i == 7 else b"m-%d" % i for i in range(250)]  # max_in_flight: 256
        for i, body in enumerate(bodies):
            await peer.send(_request(i, body, oneway=i % 10 == 9))
        with trio.fail_after(5):
            while len(appender.waiting) < 250:
                await trio.sleep(0.01)
        assert route.active == 250  # each holds its slot until settled
        appender.settle_all()  # 225 answers at once, past the outbox's bound of 16 frames
        stats = conn.statistics()  # queued by settle itself, with no checkpoint in between
        assert (stats.outbox, stats.in_flight) == (225, 0)
        answers: dict[int, RemotingCommand] = {}
        with trio.fail_after(5):
            while len(answers) < 225:
                for r in await peer.receive_batch():
                    answers[r.opaque] = r
        assert sorted(answers) == [i for i in range(250) if i % 10 != 9]
        failed = answers.pop(7)
        assert (failed.code, failed.remark) == (ResponseCode.SYSTEM_ERROR, "ValueError: no disk")
        assert all(r.code == ResponseCode.SUCCESS and r.remark == bodies[i].decode() for i, r in answers.items())
        assert route.active == 0


async def test_a_later_settled_after_its_connection_closed_is_dropped() -> None:
    appender = LaterAppender()
    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, appender, concurrency=10)
    async with raw_peer(d) as (peer, _):
        await peer.send(_request(1, b"m"))
        with trio.fail_after(5):
            while not appender.waiting:
                await trio.sleep(0.01)
        await peer.aclose()
        with trio.fail_after(5):
            await trio.testing.wait_all_tasks_blocked()
    appender.settle_all()  # nobody to answer: no error, and the slot is free again
    assert route.active == 0


async def test_a_later_can_be_awaited() -> None:
    later = Later()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.lowlevel.checkpoint)
        nursery.start_soon(lambda: _settle_soon(later))
        assert await later == "done"
    failed = Later()
    failed.settle(KeyError("x"))
    failed.settle("ignored: only the first settle counts")
    with pytest.raises(KeyError):
        await failed
    called = Later()
    called.settle_call(lambda: 1 // 0)  # what the function raises is the outcome
    with pytest.raises(ZeroDivisionError):
        await called


async def _settle_soon(later: Later) -> None:
    await trio.sleep(0.01)
    later.settle("done")


async def test_map_turns_the_outcome_into_the_answer() -> None:
    """`map` makes a Later (or a subclass: the store's PutWait) settle with what the
    function returns; an exception it raises, or one the work failed with, is the outcome."""
    later = Later()
    later.map(lambda n: n * 2)
    later.settle(21)
    assert await later == 42
    raising = Later()
    raising.map(lambda n: 1 // n)
    raising.settle(0)
    with pytest.raises(ZeroDivisionError):
        await raising
    failed = Later()
    failed.map(lambda n: pytest.fail("not called on a failure"))
    failed.settle(KeyError("x"))
    with pytest.raises(KeyError):
        await failed
    settled = Later()
    settled.settle(1)
    settled.map(lambda n: n + 1)  # settled already: mapped now
    assert await settled == 2


class _Sub(Later):
    __slots__ = ()


async def test_a_subclass_of_later_is_answered_as_a_later() -> None:
    waiting: list[tuple[RemotingCommand, Later]] = []

    class Mapper:
        async def process(self, ctx: RequestContext, request: RemotingCommand) -> Any:
            raise AssertionError("an ordered route starts requests with begin()")

        def begin(self, ctx: RequestContext, request: RemotingCommand) -> Any:
            later = _Sub()
            later.map(lambda body: request.make_response(ResponseCode.SUCCESS, body))
            waiting.append((request, later))
            return later

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, Mapper(), concurrency=10)
    async with raw_peer(d) as (peer, _):
        await peer.send(_request(1, b"m"))
        with trio.fail_after(5):
            while not waiting:
                await trio.sleep(0.01)
        waiting[0][1].settle("stored")
        with trio.fail_after(5):
            (answer,) = await peer.receive_batch()
    assert (answer.opaque, answer.code, answer.remark) == (1, ResponseCode.SUCCESS, "stored")


class GroupAppender(Appender):
    """An ordered route with `begin_many`: the requests of one read come as one list."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[list[bytes]] = []
        self.later = Later()

    def begin_many(self, jobs: list[tuple[RequestContext, RemotingCommand]]) -> list[Any]:
        self.groups.append([request.body for _, request in jobs])
        out: list[Any] = []
        for ctx, request in jobs:
            if request.body == b"later":
                out.append(self.later)
                continue
            try:
                out.append(self.begin(ctx, request))
            except ValueError as exc:
                out.append(exc)
        return out


async def test_requests_of_one_read_start_together_in_order() -> None:
    appender = GroupAppender()
    d = Dispatcher()
    route = d.register(RequestCode.SEND_MESSAGE, appender, concurrency=1000)
    async with raw_peer(d) as (peer, _):
        bodies = [b"m-0", b"bad", b"wait-2", b"m-3", b"later", b"m-5"]
        await peer.send_frames([_request(i, body).encode() for i, body in enumerate(bodies)])
        answers: dict[int, RemotingCommand] = {}
        with trio.fail_after(5):
            while len(answers) < 4:
                for r in await peer.receive_batch():
                    answers[r.opaque] = r
        assert appender.groups == [bodies] and appender.log == [b for b in bodies if b not in (b"bad", b"later")]
        assert sorted(answers) == [0, 1, 3, 5]
        assert route.active == 2  # the wait and the Later hold their slots
        appender.release.set()
        appender.later.settle(_request(4, b"later").make_response(ResponseCode.SUCCESS, "later"))
        with trio.fail_after(5):
            while len(answers) < 6:
                for r in await peer.receive_batch():
                    answers[r.opaque] = r
        assert answers[1].code == ResponseCode.SYSTEM_ERROR and "bad body" in (answers[1].remark or "")
        assert [answers[i].remark for i in (0, 2, 3, 4, 5)] == ["m-0", "wait-2", "m-3", "later", "m-5"]
        # one request in a read: begin, as before
        await peer.send(_request(9, b"alone"))
        with trio.fail_after(5):
            (alone,) = await peer.receive_batch()
        assert alone.remark == "alone" and len(appender.groups) == 1
        await trio.testing.wait_all_tasks_blocked()
        assert (route.active, route.waiting) == (0, 0)
